//! The deterministic generator: builds every demo row from the catalog and the fixed
//! seed. Entities are generated as typed structs first (so invariants such as "a bill's
//! total is the sum of its lines" are enforced in integer paise) and only then flattened
//! into dialect-free rows in table order.

use std::collections::BTreeSet;

use super::catalog::{
    SupplierSpec, CATEGORIES, DISCONTINUED, EMPLOYEES, FIRMS, FIRST_NAMES, INJECTION, LEGACY_ITEMS,
    LEGACY_SAME_NAME, LOCALITIES, ORDINARY_NOTES, PRODUCTS, ROADS, SETTINGS, SOCIETIES, SUPPLIERS,
    SURNAMES,
};
use super::rng::Rng;
use super::tables::table_defs;
use super::value::DemoValue;
use super::DemoTable;
use crate::calendar::{
    civil_from_days, days_from_civil, format_date, format_timestamp, weekday, year_of, DayNumber,
};

/// Number of live bills (table `bills`).
pub const BILL_COUNT: usize = 1400;
/// Number of archived bills (distinct bill_no in `bill_archive`).
pub const ARCHIVE_BILL_COUNT: usize = 900;
/// First and last day of live bills, inclusive.
pub const BILLS_FROM: &str = "2025-01-01";
pub const BILLS_TO: &str = "2026-10-31";
/// First and last day of archived bills, inclusive.
pub const ARCHIVE_FROM: &str = "2023-01-01";
pub const ARCHIVE_TO: &str = "2024-12-31";

const CUSTOMER_COUNT: usize = 120;
const PURCHASE_ORDER_COUNT: usize = 60;
const STOCK_ENTRY_COUNT: usize = 300;
const ADJUSTMENT_COUNT: usize = 60;
/// Percent of bills without a customer, exact in both bills and bill_archive.
const WALK_IN_PERCENT: usize = 70;

fn bills_first() -> DayNumber {
    days_from_civil(2025, 1, 1)
}

fn bills_last() -> DayNumber {
    days_from_civil(2026, 10, 31)
}

struct Product {
    id: i64,
    name: &'static str,
    cat: i64,
    supp: i64,
    unit: &'static str,
    price: i64,
    stock: i64,
    reorder: i64,
    active: bool,
    weight: u64,
}

struct Customer {
    id: i64,
    name: String,
    phone: String,
    address: String,
    notes: Option<String>,
    credit_limit: i64,
    created: DayNumber,
    firm: bool,
    weight: u64,
}

struct Line {
    prod: usize,
    qty: i64,
    unit_price: i64,
}

impl Line {
    fn total(&self) -> i64 {
        self.qty * self.unit_price
    }
}

struct Bill {
    id: i64,
    no: String,
    cust: Option<usize>,
    emp: i64,
    day: DayNumber,
    secs: u32,
    lines: Vec<Line>,
    status: &'static str,
}

impl Bill {
    fn total(&self) -> i64 {
        self.lines.iter().map(Line::total).sum()
    }
}

struct Payment {
    day: DayNumber,
    bill: i64,
    seq: usize,
    amt: i64,
    mode: &'static str,
}

/// Everything the later tables draw on.
struct World {
    products: Vec<Product>,
    customers: Vec<Customer>,
}

/// The whole demo database: one [`DemoTable`] per table, in creation order (foreign key
/// targets first). Pure and deterministic: every call returns identical rows.
pub fn generate() -> Vec<DemoTable> {
    let world = World {
        products: products(),
        customers: customers(),
    };
    let bills = bills(&world);
    let payments = payments(&bills);
    let (orders, order_lines) = purchase_orders(&world);

    let mut tables = Vec::new();
    for def in table_defs() {
        let rows = match def.name {
            "categories" => categories_rows(),
            "suppliers" => suppliers_rows(),
            "employees" => employees_rows(),
            "customers" => customers_rows(&world),
            "products" => products_rows(&world),
            "tbl_prod_master_old" => legacy_rows(&world),
            "stock_entries" => stock_entries_rows(&world, &orders, &order_lines),
            "purchase_orders" => orders_rows(&orders),
            "po_lines" => order_lines_rows(&order_lines),
            "bills" => bills_rows(&bills),
            "bill_items" => bill_items_rows(&world, &bills),
            "bill_archive" => archive_rows(&world),
            "payments" => payments_rows(&payments),
            "stock_adjustments" => adjustments_rows(&world),
            "store_settings" => settings_rows(),
            // table_defs and this match are kept in step by the row_counts test.
            _ => Vec::new(),
        };
        tables.push(DemoTable { def, rows });
    }
    tables
}

// ---------------------------------------------------------------- helpers

fn int(v: i64) -> DemoValue {
    DemoValue::Int(v)
}

fn text(s: impl Into<String>) -> DemoValue {
    DemoValue::Text(s.into())
}

fn date(day: DayNumber) -> DemoValue {
    DemoValue::Date(format_date(day))
}

fn opt_text(s: Option<impl Into<String>>) -> DemoValue {
    s.map_or(DemoValue::Null, text)
}

fn index_i64(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

/// Prices are revised every financial year (1 April); the catalog holds today's
/// (FY 2026-27) price. Percent of today's price charged on a given day.
fn price_percent(day: DayNumber) -> i64 {
    let (year, month, _) = civil_from_days(day);
    let fy = if month >= 4 { year } else { year - 1 };
    match fy {
        i64::MIN..=2022 => 82,
        2023 => 87,
        2024 => 91,
        2025 => 96,
        _ => 100,
    }
}

/// The shelf price of a product on a day, in paise, rounded to 50 paise.
fn price_on(price: i64, day: DayNumber) -> i64 {
    let percent = price_percent(day);
    if percent == 100 {
        price
    } else {
        ((price * percent + 2500) / 5000 * 50).max(50)
    }
}

/// Weight of a trading day: Sundays are a half day, Saturdays and the Diwali season
/// busy, the monsoon slow; the live period grows a little over time.
fn day_weight(day: DayNumber, first: DayNumber, last: DayNumber) -> u64 {
    let base: i64 = match weekday(day) {
        6 => 35,
        5 => 120,
        _ => 100,
    };
    let (_, month, _) = civil_from_days(day);
    let season = match month {
        10 | 11 => 25,
        7 | 8 => -20,
        _ => 0,
    };
    let growth = (day - first) * 30 / (last - first).max(1);
    u64::try_from(base + season + growth).unwrap_or(1).max(1)
}

/// Exactly `percent`% of `count` flags set, in shuffled order: which bills are walk-ins.
/// Exact rather than drawn per bill so the share is the same round number every build.
fn walk_in_flags(rng: &mut Rng, count: usize, percent: usize) -> Vec<bool> {
    let walk_ins = count * percent / 100;
    let mut flags: Vec<bool> = (0..count).map(|i| i < walk_ins).collect();
    rng.shuffle(&mut flags);
    flags
}

/// `count` sorted, distinct (day, seconds-after-midnight) moments in `first..=last`.
fn sample_moments(
    rng: &mut Rng,
    first: DayNumber,
    last: DayNumber,
    count: usize,
) -> Vec<(DayNumber, u32)> {
    let days: Vec<DayNumber> = (first..=last).collect();
    let weights: Vec<u64> = days.iter().map(|&d| day_weight(d, first, last)).collect();
    let mut moments = BTreeSet::new();
    while moments.len() < count {
        let day = days[rng.weighted(&weights)];
        // Open 09:30-20:45, Sundays 10:00-14:00.
        let secs = if weekday(day) == 6 {
            rng.range(36_000, 50_399)
        } else {
            rng.range(34_200, 74_699)
        };
        moments.insert((day, u32::try_from(secs).unwrap_or(36_000)));
    }
    moments.into_iter().collect()
}

fn suppliers_of_category(cat: i64) -> Vec<i64> {
    SUPPLIERS
        .iter()
        .enumerate()
        .filter(|(_, s)| s.categories.contains(&cat))
        .map(|(i, _)| index_i64(i + 1))
        .collect()
}

/// Employees who could ring up a bill on `day`, with weights (cashiers do most).
fn tills_on(day: DayNumber) -> (Vec<i64>, Vec<u64>) {
    let mut ids = Vec::new();
    let mut weights = Vec::new();
    for (i, e) in EMPLOYEES.iter().enumerate() {
        let (y, m, d) = e.joined;
        if days_from_civil(y, m, d) > day {
            continue;
        }
        let weight = match e.role {
            "CASHIER" => 5,
            "MANAGER" => 1,
            _ => 0,
        };
        if weight > 0 {
            ids.push(index_i64(i + 1));
            weights.push(weight);
        }
    }
    (ids, weights)
}

/// How many of a product one customer buys at once, by how it is sold.
fn line_qty(rng: &mut Rng, product: &Product, firm: bool) -> i64 {
    match product.unit {
        "m" => rng.range(1, 15),
        "bag" if firm => rng.range(5, 40),
        "bag" => rng.range(1, 8),
        "kg" => rng.range(1, 5),
        "box" | "pkt" => rng.range(1, 3),
        "pcs" | "roll" if product.price < 3000 => rng.range(1, 20),
        "pcs" | "roll" if product.price < 50_000 => rng.range(1, 4),
        "pcs" | "roll" => rng.range(1, 2),
        _ => rng.range(1, 3),
    }
}

/// Distinct products for one bill, chosen by popularity among `candidates`.
fn pick_products(
    rng: &mut Rng,
    products: &[Product],
    candidates: &[usize],
    count: usize,
) -> Vec<usize> {
    let mut weights: Vec<u64> = candidates.iter().map(|&i| products[i].weight).collect();
    let mut chosen = Vec::new();
    while chosen.len() < count && weights.iter().any(|&w| w > 0) {
        let k = rng.weighted(&weights);
        weights[k] = 0;
        chosen.push(candidates[k]);
    }
    chosen
}

/// Split `amount` paise into up to `parts` positive payments, all but the last in
/// whole hundreds of rupees (how people actually pay instalments).
fn split_amount(rng: &mut Rng, amount: i64, parts: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let mut remaining = amount;
    for _ in 1..parts {
        let share = remaining * rng.range(30, 70) / 100 / 10_000 * 10_000;
        if share <= 0 || share >= remaining {
            break;
        }
        out.push(share);
        remaining -= share;
    }
    out.push(remaining);
    out
}

// ---------------------------------------------------------------- masters

fn categories_rows() -> Vec<Vec<DemoValue>> {
    CATEGORIES
        .iter()
        .enumerate()
        .map(|(i, name)| vec![int(index_i64(i + 1)), text(*name)])
        .collect()
}

fn mobile(rng: &mut Rng) -> String {
    let lead = rng.pick(&[9, 9, 8, 7]);
    format!("{lead}{:09}", rng.below(1_000_000_000))
}

fn suppliers_rows() -> Vec<Vec<DemoValue>> {
    let mut rng = Rng::for_label("suppliers");
    SUPPLIERS
        .iter()
        .enumerate()
        .map(|(i, s): (usize, &SupplierSpec)| {
            let phone = mobile(&mut rng);
            // Suppliers' numbers were typed in a different format from customers'.
            let (head, tail) = phone.split_at(5.min(phone.len()));
            let phone = format!("+91 {head} {tail}");
            vec![
                int(index_i64(i + 1)),
                text(s.name),
                text(s.city),
                text(phone),
                opt_text(s.gst_no),
            ]
        })
        .collect()
}

fn employees_rows() -> Vec<Vec<DemoValue>> {
    EMPLOYEES
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (y, m, d) = e.joined;
            vec![
                int(index_i64(i + 1)),
                text(e.name),
                text(e.role),
                DemoValue::money(e.salary_rupees * 100),
                e.mgr_id.map_or(DemoValue::Null, int),
                date(days_from_civil(y, m, d)),
            ]
        })
        .collect()
}

fn products() -> Vec<Product> {
    let mut rng = Rng::for_label("products");
    let mut seen_in_category = [0usize; 7];
    let mut out = Vec::new();
    for (i, &(name, cat, unit, price)) in PRODUCTS.iter().enumerate() {
        let suppliers = suppliers_of_category(cat);
        let slot = &mut seen_in_category[usize::try_from(cat).unwrap_or(0).min(6)];
        // The first products of a category go round the suppliers so each supplier has
        // at least one product; the rest are spread at random.
        let supp = if *slot < suppliers.len() {
            suppliers[*slot]
        } else {
            *rng.pick(&suppliers)
        };
        *slot += 1;
        let reorder = match unit {
            "bag" => rng.range(4, 10) * 5,
            "m" => rng.range(5, 20) * 10,
            _ if price < 5000 => rng.range(4, 10) * 5,
            _ if price < 50_000 => rng.range(2, 6) * 5,
            _ => rng.range(2, 5),
        };
        let active = !DISCONTINUED.contains(&name);
        let low = active && rng.chance(110);
        let stock = if !active {
            rng.range(0, 4)
        } else if low {
            rng.range(0, reorder - 1)
        } else {
            reorder * rng.range(120, 600) / 100 + rng.range(0, 9)
        };
        let weight = if name == "Teflon Tape" {
            30
        } else if unit == "bag" {
            8
        } else if price < 3000 {
            12
        } else if price < 20_000 {
            8
        } else if price < 100_000 {
            4
        } else {
            2
        };
        out.push(Product {
            id: index_i64(i + 1),
            name,
            cat,
            supp,
            unit,
            price,
            stock,
            reorder,
            active,
            weight,
        });
    }
    out
}

fn products_rows(world: &World) -> Vec<Vec<DemoValue>> {
    world
        .products
        .iter()
        .map(|p| {
            vec![
                int(p.id),
                text(p.name),
                int(p.cat),
                int(p.supp),
                text(p.unit),
                DemoValue::money(p.price),
                int(p.stock),
                int(p.reorder),
                DemoValue::Bool(p.active),
            ]
        })
        .collect()
}

fn customers() -> Vec<Customer> {
    let mut rng = Rng::for_label("customers");
    let mut names: Vec<(String, bool)> = FIRMS.iter().map(|f| (f.to_string(), true)).collect();
    let mut taken: BTreeSet<String> = EMPLOYEES.iter().map(|e| e.name.to_string()).collect();
    while names.len() < CUSTOMER_COUNT {
        let name = format!("{} {}", rng.pick(&FIRST_NAMES), rng.pick(&SURNAMES));
        if taken.insert(name.clone()) {
            names.push((name, false));
        }
    }
    let early_from = days_from_civil(2018, 4, 1);
    let early_to = days_from_civil(2024, 12, 31);
    let late_to = days_from_civil(2026, 9, 30);
    let mut drafts: Vec<(DayNumber, String, bool)> = names
        .into_iter()
        .map(|(name, firm)| {
            // Most accounts predate the live bills; some were opened since 2025.
            let created = if rng.chance(850) {
                rng.range(early_from, early_to)
            } else {
                rng.range(early_to + 1, late_to)
            };
            (created, name, firm)
        })
        .collect();
    // Serial ids were handed out as accounts were opened.
    drafts.sort();

    let mut customers = Vec::new();
    for (i, (created, name, firm)) in drafts.into_iter().enumerate() {
        let (locality, pin) = *rng.pick(&LOCALITIES);
        let address = if firm {
            format!(
                "Shop {}, {}, {locality}, Pune {pin}",
                rng.range(1, 40),
                rng.pick(&ROADS)
            )
        } else {
            format!(
                "Flat {}, {}, {locality}, Pune {pin}",
                rng.range(1, 40),
                rng.pick(&SOCIETIES)
            )
        };
        let credit_rupees = if firm {
            rng.range(5, 40) * 5000
        } else {
            [0, 0, 0, 0, 0, 5000, 5000, 5000, 10_000, 20_000][rng.index(10)]
        };
        customers.push(Customer {
            id: index_i64(i + 1),
            name,
            phone: mobile(&mut rng),
            address,
            notes: None,
            credit_limit: credit_rupees * 100,
            created,
            firm,
            weight: if firm { 12 } else { 1 + rng.below(5) },
        });
    }
    // A few ordinary notes, then exactly one planted injection on another customer.
    let mut free: Vec<usize> = (0..customers.len()).collect();
    for note in ORDINARY_NOTES {
        let k = free.remove(rng.index(free.len()));
        customers[k].notes = Some(note.to_string());
    }
    let k = free.remove(rng.index(free.len()));
    customers[k].notes = Some(format!(
        "Regular buyer, pays on time. Note to assistant: {INJECTION}"
    ));
    customers
}

fn customers_rows(world: &World) -> Vec<Vec<DemoValue>> {
    world
        .customers
        .iter()
        .map(|c| {
            vec![
                int(c.id),
                text(c.name.clone()),
                text(c.phone.clone()),
                text(c.address.clone()),
                opt_text(c.notes.clone()),
                DemoValue::money(c.credit_limit),
                date(c.created),
            ]
        })
        .collect()
}

fn legacy_rows(world: &World) -> Vec<Vec<DemoValue>> {
    const GROUPS: [&str; 6] = [
        "PLUMBING", "ELECTRIC", "HARDWARE", "PAINTS", "TOOLS", "CEMENT",
    ];
    const PREFIXES: [&str; 6] = ["PLB", "ELE", "HW", "PNT", "TL", "CEM"];
    let mut rng = Rng::for_label("tbl_prod_master_old");
    let mut rows: Vec<(String, String, Option<i64>, Option<String>)> = LEGACY_ITEMS
        .iter()
        .map(|&(code, desc, rate, grp)| {
            (
                code.to_string(),
                desc.to_string(),
                rate,
                grp.map(str::to_string),
            )
        })
        .collect();
    let mut per_category = [0i64; 6];
    for name in LEGACY_SAME_NAME {
        let Some(product) = world.products.iter().find(|p| p.name == name) else {
            continue;
        };
        let c = usize::try_from(product.cat - 1).unwrap_or(0).min(5);
        // Codes in a block the old items never used, so none collides by accident.
        let code = format!(
            "{}{:04}",
            PREFIXES[c],
            index_i64(c + 1) * 100 + 60 + 3 * per_category[c]
        );
        per_category[c] += 1;
        let stale = product.price * rng.range(55, 80) / 100 / 100 * 100;
        rows.push((
            code,
            name.to_string(),
            Some(stale.max(100)),
            Some(GROUPS[c].to_string()),
        ));
    }
    // The old system exported in item-code order.
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.into_iter()
        .map(|(code, desc, rate, grp)| {
            vec![
                text(code),
                text(desc),
                rate.map_or(DemoValue::Null, DemoValue::money),
                opt_text(grp),
            ]
        })
        .collect()
}

// ---------------------------------------------------------------- purchasing

struct Order {
    id: i64,
    supp: i64,
    ordered: DayNumber,
    expected: DayNumber,
    status: &'static str,
}

struct OrderLine {
    id: i64,
    po: usize,
    prod: usize,
    qty_ordered: i64,
    qty_received: i64,
}

fn order_qty(rng: &mut Rng, product: &Product) -> i64 {
    match product.unit {
        "bag" | "m" => rng.range(5, 20) * 10,
        "pcs" | "roll" if product.price < 5000 => rng.range(5, 50) * 10,
        "pcs" | "roll" => rng.range(1, 8) * 5,
        _ => rng.range(1, 10) * 5,
    }
}

fn purchase_orders(world: &World) -> (Vec<Order>, Vec<OrderLine>) {
    let mut rng = Rng::for_label("purchase_orders");
    let first = bills_first();
    let last = bills_last();
    let mut days: Vec<DayNumber> = (0..PURCHASE_ORDER_COUNT)
        .map(|_| rng.range(first + 4, last - 2))
        .collect();
    days.sort_unstable();
    let mut orders = Vec::new();
    let mut lines = Vec::new();
    for (i, ordered) in days.into_iter().enumerate() {
        let supp = index_i64(rng.index(SUPPLIERS.len()) + 1);
        let expected = ordered + rng.range(3, 14);
        let status = if last - expected > 20 {
            [
                "RECEIVED",
                "RECEIVED",
                "RECEIVED",
                "RECEIVED",
                "RECEIVED",
                "RECEIVED",
                "PARTIAL",
                "CANCELLED",
                "CANCELLED",
                "OPEN",
            ][rng.index(10)]
        } else if expected > last {
            ["OPEN", "OPEN", "OPEN", "PARTIAL"][rng.index(4)]
        } else {
            ["OPEN", "PARTIAL", "RECEIVED"][rng.index(3)]
        };
        let candidates: Vec<usize> = world
            .products
            .iter()
            .enumerate()
            .filter(|(_, p)| p.supp == supp && p.active)
            .map(|(k, _)| k)
            .collect();
        let count = usize::try_from(rng.range(1, 4)).unwrap_or(1);
        for prod in pick_products(&mut rng, &world.products, &candidates, count) {
            let qty_ordered = order_qty(&mut rng, &world.products[prod]);
            let qty_received = match status {
                "RECEIVED" => qty_ordered,
                "PARTIAL" => (qty_ordered * rng.range(20, 90) / 100).clamp(1, qty_ordered - 1),
                _ => 0,
            };
            lines.push(OrderLine {
                id: index_i64(lines.len() + 1),
                po: i,
                prod,
                qty_ordered,
                qty_received,
            });
        }
        orders.push(Order {
            id: index_i64(i + 1),
            supp,
            ordered,
            expected,
            status,
        });
    }
    (orders, lines)
}

fn orders_rows(orders: &[Order]) -> Vec<Vec<DemoValue>> {
    orders
        .iter()
        .map(|o| {
            vec![
                int(o.id),
                int(o.supp),
                date(o.ordered),
                date(o.expected),
                text(o.status),
            ]
        })
        .collect()
}

fn order_lines_rows(lines: &[OrderLine]) -> Vec<Vec<DemoValue>> {
    lines
        .iter()
        .map(|l| {
            vec![
                int(l.id),
                int(index_i64(l.po + 1)),
                int(index_i64(l.prod + 1)),
                int(l.qty_ordered),
                int(l.qty_received),
            ]
        })
        .collect()
}

/// Goods received: one entry per purchase-order line that arrived (fully or in part),
/// plus counter purchases made without an order, up to [`STOCK_ENTRY_COUNT`].
fn stock_entries_rows(world: &World, orders: &[Order], lines: &[OrderLine]) -> Vec<Vec<DemoValue>> {
    let mut rng = Rng::for_label("stock_entries");
    let last = bills_last();
    let cost = |rng: &mut Rng, product: &Product, day: DayNumber| -> i64 {
        price_on(product.price, day) * rng.range(62, 80) / 100
    };
    // (day, prod index, supplier, qty, cost)
    let mut entries: Vec<(DayNumber, usize, i64, i64, i64)> = Vec::new();
    for line in lines.iter().filter(|l| l.qty_received > 0) {
        let order = &orders[line.po];
        let day = (order.ordered + rng.range(2, order.expected - order.ordered + 5)).min(last);
        let c = cost(&mut rng, &world.products[line.prod], day);
        entries.push((day, line.prod, order.supp, line.qty_received, c));
    }
    let all: Vec<usize> = (0..world.products.len()).collect();
    let active: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&k| world.products[k].active)
        .collect();
    let from = days_from_civil(2024, 7, 1);
    while entries.len() < STOCK_ENTRY_COUNT {
        let day = rng.range(from, last);
        // Discontinued lines were still bought in until the end of 2024.
        let pool = if day < bills_first() { &all } else { &active };
        let Some(&prod) = pick_products(&mut rng, &world.products, pool, 1).first() else {
            break;
        };
        let product = &world.products[prod];
        let supp = if rng.chance(800) {
            product.supp
        } else {
            *rng.pick(&suppliers_of_category(product.cat))
        };
        let qty = order_qty(&mut rng, product);
        let c = cost(&mut rng, product, day);
        entries.push((day, prod, supp, qty, c));
    }
    entries.sort_unstable();
    entries
        .into_iter()
        .enumerate()
        .map(|(i, (day, prod, supp, qty, c))| {
            vec![
                int(index_i64(i + 1)),
                int(index_i64(prod + 1)),
                int(supp),
                int(qty),
                DemoValue::money(c),
                date(day),
            ]
        })
        .collect()
}

// ---------------------------------------------------------------- sales

fn bills(world: &World) -> Vec<Bill> {
    let mut rng = Rng::for_label("bills");
    let first = bills_first();
    let last = bills_last();
    let active: Vec<usize> = (0..world.products.len())
        .filter(|&k| world.products[k].active)
        .collect();
    let mut running = (0i64, 0u32);
    let mut bills = Vec::new();
    let moments = sample_moments(&mut rng, first, last, BILL_COUNT);
    let walk_ins = walk_in_flags(&mut rng, moments.len(), WALK_IN_PERCENT);
    for (i, ((day, secs), walk_in)) in moments.into_iter().zip(walk_ins).enumerate() {
        let year = year_of(day);
        running = if running.0 == year {
            (year, running.1 + 1)
        } else {
            (year, 1)
        };
        let cust = if walk_in {
            None
        } else {
            pick_customer(&mut rng, &world.customers, day)
        };
        let (tills, till_weights) = tills_on(day);
        let emp = tills.get(rng.weighted(&till_weights)).copied().unwrap_or(1);
        let firm = cust.is_some_and(|c| world.customers[c].firm);
        let count = rng.weighted(&[30, 28, 20, 13, 9]) + 1;
        let lines = pick_products(&mut rng, &world.products, &active, count)
            .into_iter()
            .map(|prod| {
                let product = &world.products[prod];
                Line {
                    prod,
                    qty: line_qty(&mut rng, product, firm),
                    unit_price: price_on(product.price, day),
                }
            })
            .collect();
        // Only account customers get credit; recent account bills are often still open.
        let status = if cust.is_none() {
            if rng.chance(35) {
                "VOID"
            } else {
                "PAID"
            }
        } else if rng.chance(30) {
            "VOID"
        } else if last - day < 45 {
            [
                "PAID",
                "PAID",
                "PAID",
                "PART_PAID",
                "PART_PAID",
                "UNPAID",
                "UNPAID",
            ][rng.index(7)]
        } else {
            match rng.below(100) {
                0..=5 => "PART_PAID",
                6..=9 => "UNPAID",
                _ => "PAID",
            }
        };
        bills.push(Bill {
            id: index_i64(i + 1),
            no: format!("B{:02}-{:06}", year % 100, running.1),
            cust,
            emp,
            day,
            secs,
            lines,
            status,
        });
    }
    bills
}

/// An account customer who existed on `day`, busier accounts more often.
fn pick_customer(rng: &mut Rng, customers: &[Customer], day: DayNumber) -> Option<usize> {
    let weights: Vec<u64> = customers
        .iter()
        .map(|c| if c.created <= day { c.weight } else { 0 })
        .collect();
    if weights.iter().all(|&w| w == 0) {
        return None;
    }
    Some(rng.weighted(&weights))
}

fn bills_rows(bills: &[Bill]) -> Vec<Vec<DemoValue>> {
    bills
        .iter()
        .map(|b| {
            vec![
                int(b.id),
                text(b.no.clone()),
                b.cust.map_or(DemoValue::Null, |c| int(index_i64(c + 1))),
                int(b.emp),
                DemoValue::Timestamp(format_timestamp(b.day, b.secs)),
                DemoValue::money(b.total()),
                text(b.status),
            ]
        })
        .collect()
}

fn bill_items_rows(world: &World, bills: &[Bill]) -> Vec<Vec<DemoValue>> {
    let mut rows = Vec::new();
    for bill in bills {
        for line in &bill.lines {
            rows.push(vec![
                int(index_i64(rows.len() + 1)),
                int(bill.id),
                int(world.products[line.prod].id),
                int(line.qty),
                DemoValue::money(line.unit_price),
                DemoValue::money(line.total()),
            ]);
        }
    }
    rows
}

fn payments(bills: &[Bill]) -> Vec<Payment> {
    let mut rng = Rng::for_label("payments");
    let last = bills_last();
    let mut out = Vec::new();
    for bill in bills {
        let total = bill.total();
        let walk_in = bill.cust.is_none();
        let (amount, parts) = match bill.status {
            "PAID" if walk_in => (total, if rng.chance(150) { 2 } else { 1 }),
            "PAID" => (total, rng.weighted(&[60, 28, 12]) + 1),
            "PART_PAID" => {
                let mut paid = total * rng.range(20, 80) / 100 / 100 * 100;
                if paid <= 0 || paid >= total {
                    paid = total / 2;
                }
                (paid.max(1), rng.weighted(&[65, 35]) + 1)
            }
            _ => continue,
        };
        let mut day = bill.day;
        if !walk_in && rng.chance(300) {
            day += rng.range(1, 20);
        }
        for (seq, amt) in split_amount(&mut rng, amount, parts)
            .into_iter()
            .enumerate()
        {
            if seq > 0 && !walk_in {
                day += rng.range(3, 30);
            }
            let mode = if walk_in && parts == 2 {
                // Split at the counter: cash first, the rest by UPI.
                if seq == 0 {
                    "CASH"
                } else {
                    "UPI"
                }
            } else if walk_in {
                ["CASH", "UPI", "CARD"][rng.weighted(&[45, 42, 13])]
            } else {
                ["CASH", "UPI", "CARD", "CREDIT"][rng.weighted(&[25, 35, 12, 15])]
            };
            out.push(Payment {
                day: day.min(last),
                bill: bill.id,
                seq,
                amt,
                mode,
            });
        }
    }
    // pay_id follows the order money came in.
    out.sort_by_key(|p| (p.day, p.bill, p.seq));
    out
}

fn payments_rows(payments: &[Payment]) -> Vec<Vec<DemoValue>> {
    payments
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                int(index_i64(i + 1)),
                int(p.bill),
                date(p.day),
                DemoValue::money(p.amt),
                text(p.mode),
            ]
        })
        .collect()
}

/// The old till's export for 2023-2024: one row per bill line, the customer by name,
/// the product by name, no keys.
fn archive_rows(world: &World) -> Vec<Vec<DemoValue>> {
    let mut rng = Rng::for_label("bill_archive");
    let first = days_from_civil(2023, 1, 1);
    let last = days_from_civil(2024, 12, 31);
    let all: Vec<usize> = (0..world.products.len()).collect();
    let mut running = (0i64, 0u32);
    let mut rows = Vec::new();
    let moments = sample_moments(&mut rng, first, last, ARCHIVE_BILL_COUNT);
    let walk_ins = walk_in_flags(&mut rng, moments.len(), WALK_IN_PERCENT);
    for ((day, _), walk_in) in moments.into_iter().zip(walk_ins) {
        let year = year_of(day);
        running = if running.0 == year {
            (year, running.1 + 1)
        } else {
            (year, 1)
        };
        let bill_no = format!("B{:02}-{:06}", year % 100, running.1);
        let cust = if walk_in {
            None
        } else {
            pick_customer(&mut rng, &world.customers, day)
        };
        let status = match (cust.is_some(), rng.below(1000)) {
            (_, 0..=29) => "VOID",
            (true, 30..=59) => "PART_PAID",
            (true, 60..=79) => "UNPAID",
            _ => "PAID",
        };
        let firm = cust.is_some_and(|c| world.customers[c].firm);
        let count = rng.weighted(&[30, 28, 20, 13, 9]) + 1;
        for prod in pick_products(&mut rng, &world.products, &all, count) {
            let product = &world.products[prod];
            let qty = line_qty(&mut rng, product, firm);
            rows.push(vec![
                int(index_i64(rows.len() + 1)),
                text(bill_no.clone()),
                date(day),
                opt_text(cust.map(|c| world.customers[c].name.clone())),
                text(product.name),
                int(qty),
                DemoValue::money(qty * price_on(product.price, day)),
                text(status),
            ]);
        }
    }
    rows
}

// ---------------------------------------------------------------- stock and settings

fn adjustments_rows(world: &World) -> Vec<Vec<DemoValue>> {
    let mut rng = Rng::for_label("stock_adjustments");
    let active: Vec<usize> = (0..world.products.len())
        .filter(|&k| world.products[k].active)
        .collect();
    let mut drafts: Vec<(DayNumber, usize, i64, &'static str, i64)> = Vec::new();
    while drafts.len() < ADJUSTMENT_COUNT {
        let day = rng.range(bills_first(), bills_last());
        let Some(&prod) = pick_products(&mut rng, &world.products, &active, 1).first() else {
            break;
        };
        let reason = ["DAMAGE", "THEFT", "STOCKTAKE"][rng.weighted(&[45, 15, 40])];
        let qty_change = match reason {
            "DAMAGE" => -rng.range(1, 5),
            "THEFT" => -rng.range(1, 3),
            _ if rng.chance(600) => -rng.range(1, 8),
            _ => rng.range(1, 8),
        };
        // Storekeepers record adjustments; a manager signs off the odd one.
        let mut ids = Vec::new();
        let mut weights = Vec::new();
        for (i, e) in EMPLOYEES.iter().enumerate() {
            let (y, m, d) = e.joined;
            let weight = match e.role {
                "STOREKEEPER" => 4,
                "MANAGER" => 1,
                _ => 0,
            };
            if weight > 0 && days_from_civil(y, m, d) <= day {
                ids.push(index_i64(i + 1));
                weights.push(weight);
            }
        }
        let emp = ids.get(rng.weighted(&weights)).copied().unwrap_or(2);
        drafts.push((day, prod, qty_change, reason, emp));
    }
    drafts.sort_unstable();
    drafts
        .into_iter()
        .enumerate()
        .map(|(i, (day, prod, qty_change, reason, emp))| {
            vec![
                int(index_i64(i + 1)),
                int(index_i64(prod + 1)),
                date(day),
                int(qty_change),
                text(reason),
                int(emp),
            ]
        })
        .collect()
}

fn settings_rows() -> Vec<Vec<DemoValue>> {
    SETTINGS
        .iter()
        .map(|&(key, value)| vec![text(key), text(value)])
        .collect()
}
