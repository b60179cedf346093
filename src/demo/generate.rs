//! The deterministic generator: builds every demo row from the catalog and the fixed
//! seed. Entities are generated as typed structs first (so invariants such as "a bill's
//! total is the sum of its lines" are enforced in integer paise) and only then flattened
//! into dialect-free rows in table order.

mod masters;
mod purchasing;
mod sales;

use std::collections::BTreeSet;

use super::catalog::{EMPLOYEES, SETTINGS, SUPPLIERS};
use super::rng::Rng;
use super::tables::table_defs;
use super::value::DemoValue;
use super::DemoTable;
use crate::calendar::{civil_from_days, days_from_civil, format_date, weekday, DayNumber};
use masters::{
    categories_rows, customers, customers_rows, employees_rows, legacy_rows, products,
    products_rows, suppliers_rows,
};
use purchasing::{order_lines_rows, orders_rows, purchase_orders, stock_entries_rows};
use sales::{archive_rows, bill_items_rows, bills, bills_rows, payments, payments_rows};

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
