//! The demo database's fifteen tables as dialect-free definitions: names, types,
//! nullability and keys exactly as docs/spec demo-database.md gives them, mess included.
//! The DDL renderers (`ddl.rs`) and every loader work from these.

/// A column type, independent of SQL dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// An auto-numbered integer key. Demo rows always write the id explicitly.
    Serial,
    Int,
    Varchar(u16),
    Text,
    /// numeric(precision, scale).
    Numeric(u8, u8),
    Bool,
    Date,
    Timestamp,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: &'static str,
    pub ty: ColumnType,
    pub nullable: bool,
    pub primary_key: bool,
    pub unique: bool,
    /// Foreign key target as (table, column).
    pub references: Option<(&'static str, &'static str)>,
}

/// One table: its name and its columns in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub name: &'static str,
    pub columns: Vec<ColumnDef>,
}

impl TableDef {
    /// The column that is the primary key, when there is one (no demo table has a
    /// composite key).
    pub fn primary_key(&self) -> Option<&ColumnDef> {
        self.columns.iter().find(|c| c.primary_key)
    }

    /// Position of a column by name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

// Small constructors keep the table list below readable as a schema.
fn col(name: &'static str, ty: ColumnType) -> ColumnDef {
    ColumnDef {
        name,
        ty,
        nullable: false,
        primary_key: false,
        unique: false,
        references: None,
    }
}

fn null(name: &'static str, ty: ColumnType) -> ColumnDef {
    ColumnDef {
        nullable: true,
        ..col(name, ty)
    }
}

fn serial(name: &'static str) -> ColumnDef {
    ColumnDef {
        primary_key: true,
        ..col(name, ColumnType::Serial)
    }
}

fn fk(name: &'static str, table: &'static str, column: &'static str) -> ColumnDef {
    ColumnDef {
        references: Some((table, column)),
        ..col(name, ColumnType::Int)
    }
}

fn null_fk(name: &'static str, table: &'static str, column: &'static str) -> ColumnDef {
    ColumnDef {
        nullable: true,
        ..fk(name, table, column)
    }
}

use ColumnType::{Bool, Date, Int, Numeric, Text, Timestamp, Varchar};

/// Every demo table, ordered so each foreign key's target is created first.
pub fn table_defs() -> Vec<TableDef> {
    vec![
        TableDef {
            name: "categories",
            columns: vec![serial("cat_id"), col("cat_name", Varchar(40))],
        },
        TableDef {
            name: "suppliers",
            columns: vec![
                serial("supp_id"),
                col("supp_name", Varchar(80)),
                col("city", Varchar(40)),
                col("phone", Varchar(20)),
                null("gst_no", Varchar(15)),
            ],
        },
        TableDef {
            name: "employees",
            columns: vec![
                serial("emp_id"),
                col("emp_name", Varchar(60)),
                col("role", Varchar(20)),
                col("salary", Numeric(10, 2)),
                null_fk("mgr_id", "employees", "emp_id"),
                col("joined_dt", Date),
            ],
        },
        TableDef {
            name: "customers",
            columns: vec![
                serial("cust_id"),
                col("cust_name", Varchar(80)),
                col("phone", Varchar(20)),
                col("address", Text),
                null("notes", Text),
                col("credit_limit", Numeric(12, 2)),
                col("created_dt", Date),
            ],
        },
        TableDef {
            name: "products",
            columns: vec![
                serial("prod_id"),
                col("prod_name", Varchar(80)),
                fk("cat_id", "categories", "cat_id"),
                fk("supp_id", "suppliers", "supp_id"),
                col("unit", Varchar(10)),
                col("price", Numeric(10, 2)),
                col("stock_qty", Int),
                col("reorder_lvl", Int),
                col("is_active", Bool),
            ],
        },
        // Legacy import: no key and no constraints at all, which is the point.
        TableDef {
            name: "tbl_prod_master_old",
            columns: vec![
                null("item_code", Varchar(20)),
                null("item_desc", Varchar(100)),
                null("rate", Numeric(10, 2)),
                null("grp", Varchar(20)),
            ],
        },
        TableDef {
            name: "stock_entries",
            columns: vec![
                serial("entry_id"),
                fk("prod_id", "products", "prod_id"),
                fk("supp_id", "suppliers", "supp_id"),
                col("qty", Int),
                col("cost_price", Numeric(10, 2)),
                col("recv_dt", Date),
            ],
        },
        TableDef {
            name: "purchase_orders",
            columns: vec![
                serial("po_id"),
                fk("supp_id", "suppliers", "supp_id"),
                col("order_dt", Date),
                col("expected_dt", Date),
                col("status", Varchar(12)),
            ],
        },
        TableDef {
            name: "po_lines",
            columns: vec![
                serial("po_line_id"),
                fk("po_id", "purchase_orders", "po_id"),
                fk("prod_id", "products", "prod_id"),
                col("qty_ordered", Int),
                col("qty_received", Int),
            ],
        },
        TableDef {
            name: "bills",
            columns: vec![
                serial("bill_id"),
                ColumnDef {
                    unique: true,
                    ..col("bill_no", Varchar(20))
                },
                null_fk("cust_id", "customers", "cust_id"),
                fk("emp_id", "employees", "emp_id"),
                col("txn_dt", Timestamp),
                col("total_amt", Numeric(12, 2)),
                col("status", Varchar(12)),
            ],
        },
        TableDef {
            name: "bill_items",
            columns: vec![
                serial("item_id"),
                fk("bill_id", "bills", "bill_id"),
                fk("prod_id", "products", "prod_id"),
                col("qty", Int),
                col("unit_price", Numeric(10, 2)),
                col("line_total", Numeric(12, 2)),
            ],
        },
        // Flattened export of the old till: no keys, one row per bill line.
        TableDef {
            name: "bill_archive",
            columns: vec![
                col("arch_id", Int),
                col("bill_no", Varchar(20)),
                col("txn_dt", Date),
                null("cust_name", Varchar(80)),
                col("prod_name", Varchar(80)),
                col("qty", Int),
                col("amt", Numeric(12, 2)),
                col("status", Varchar(12)),
            ],
        },
        TableDef {
            name: "payments",
            columns: vec![
                serial("pay_id"),
                fk("bill_id", "bills", "bill_id"),
                col("paid_dt", Date),
                col("amt", Numeric(12, 2)),
                col("mode", Varchar(10)),
            ],
        },
        TableDef {
            name: "stock_adjustments",
            columns: vec![
                serial("adj_id"),
                fk("prod_id", "products", "prod_id"),
                col("adj_dt", Date),
                col("qty_change", Int),
                col("reason", Varchar(20)),
                fk("emp_id", "employees", "emp_id"),
            ],
        },
        TableDef {
            name: "store_settings",
            columns: vec![
                ColumnDef {
                    primary_key: true,
                    ..col("setting_key", Varchar(40))
                },
                null("setting_value", Text),
            ],
        },
    ]
}
