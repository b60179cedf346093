//! Sales: live bills with their lines, the payments against them, and the archived
//! bills of earlier years.

use crate::calendar::{days_from_civil, format_timestamp, year_of, DayNumber};
use crate::demo::rng::Rng;
use crate::demo::value::DemoValue;

use super::{
    bills_first, bills_last, date, index_i64, int, line_qty, opt_text, pick_products, price_on,
    sample_moments, split_amount, text, tills_on, walk_in_flags, Bill, Customer, Line, Payment,
    World, ARCHIVE_BILL_COUNT, BILL_COUNT, WALK_IN_PERCENT,
};

pub(super) fn bills(world: &World) -> Vec<Bill> {
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

pub(super) fn bills_rows(bills: &[Bill]) -> Vec<Vec<DemoValue>> {
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

pub(super) fn bill_items_rows(world: &World, bills: &[Bill]) -> Vec<Vec<DemoValue>> {
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

pub(super) fn payments(bills: &[Bill]) -> Vec<Payment> {
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

pub(super) fn payments_rows(payments: &[Payment]) -> Vec<Vec<DemoValue>> {
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
pub(super) fn archive_rows(world: &World) -> Vec<Vec<DemoValue>> {
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
