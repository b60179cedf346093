//! The master data of the demo: categories, suppliers, employees, products and
//! customers (with their deliberate mess), and the legacy product table.

use std::collections::BTreeSet;

use crate::calendar::{days_from_civil, DayNumber};
use crate::demo::catalog::{
    SupplierSpec, CATEGORIES, DISCONTINUED, EMPLOYEES, FIRMS, FIRST_NAMES, INJECTION, LEGACY_ITEMS,
    LEGACY_SAME_NAME, LOCALITIES, ORDINARY_NOTES, PRODUCTS, ROADS, SOCIETIES, SUPPLIERS, SURNAMES,
};
use crate::demo::rng::Rng;
use crate::demo::value::DemoValue;

use super::{
    date, index_i64, int, opt_text, suppliers_of_category, text, Customer, Product, World,
    CUSTOMER_COUNT,
};

pub(super) fn categories_rows() -> Vec<Vec<DemoValue>> {
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

pub(super) fn suppliers_rows() -> Vec<Vec<DemoValue>> {
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

pub(super) fn employees_rows() -> Vec<Vec<DemoValue>> {
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

pub(super) fn products() -> Vec<Product> {
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

pub(super) fn products_rows(world: &World) -> Vec<Vec<DemoValue>> {
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

pub(super) fn customers() -> Vec<Customer> {
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

pub(super) fn customers_rows(world: &World) -> Vec<Vec<DemoValue>> {
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

pub(super) fn legacy_rows(world: &World) -> Vec<Vec<DemoValue>> {
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
