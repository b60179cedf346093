//! Purchasing: purchase orders and their lines, and the stock entries that receive them.

use crate::calendar::{days_from_civil, DayNumber};
use crate::demo::catalog::SUPPLIERS;
use crate::demo::rng::Rng;
use crate::demo::value::DemoValue;

use super::{
    bills_first, bills_last, date, index_i64, int, pick_products, price_on, suppliers_of_category,
    text, Product, World, PURCHASE_ORDER_COUNT, STOCK_ENTRY_COUNT,
};

pub(super) struct Order {
    id: i64,
    supp: i64,
    ordered: DayNumber,
    expected: DayNumber,
    status: &'static str,
}

pub(super) struct OrderLine {
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

pub(super) fn purchase_orders(world: &World) -> (Vec<Order>, Vec<OrderLine>) {
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

pub(super) fn orders_rows(orders: &[Order]) -> Vec<Vec<DemoValue>> {
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

pub(super) fn order_lines_rows(lines: &[OrderLine]) -> Vec<Vec<DemoValue>> {
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
pub(super) fn stock_entries_rows(
    world: &World,
    orders: &[Order],
    lines: &[OrderLine],
) -> Vec<Vec<DemoValue>> {
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
