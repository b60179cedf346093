//! Lexical matching of a question against the schema: word splitting (snake_case,
//! camelCase), expansion of the abbreviations schemas are written in, a light English
//! stemmer, and a BM25 index with one document per table whose fields (table name,
//! column names, description) weigh differently.
//!
//! Written here rather than pulled from a crate: the whole job is a hundred lines, and
//! the choices in it (which abbreviations, which suffixes) are the linker's own.

use std::collections::{BTreeMap, BTreeSet};

/// Abbreviations expanded wherever they appear, in questions as in schema names.
const ABBREVIATIONS: [(&str, &[&str]); 16] = [
    ("cust", &["customer"]),
    ("prod", &["product"]),
    ("supp", &["supplier"]),
    ("emp", &["employee"]),
    ("amt", &["amount"]),
    ("qty", &["quantity"]),
    ("txn", &["transaction"]),
    ("dt", &["date"]),
    ("po", &["purchase", "order"]),
    ("pos", &["purchase", "order"]),
    ("cat", &["category"]),
    ("mgr", &["manager"]),
    ("adj", &["adjustment"]),
    ("avg", &["average"]),
    ("dob", &["birth", "date"]),
    ("info", &["information"]),
];

/// Abbreviations expanded only inside identifiers: as English words in a question
/// ("no customer") they mean something else.
const IDENTIFIER_ABBREVIATIONS: [(&str, &[&str]); 12] = [
    ("no", &["number"]),
    ("num", &["number"]),
    ("lvl", &["level"]),
    ("recv", &["receive"]),
    ("arch", &["archive"]),
    ("grp", &["group"]),
    ("addr", &["address"]),
    ("desc", &["description"]),
    ("pct", &["percent"]),
    ("dept", &["department"]),
    ("cnt", &["count"]),
    ("yr", &["year"]),
];

/// Function words and question scaffolding: they match every table equally or none.
const STOP_WORDS: [&str; 80] = [
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "each", "every", "find", "for", "from", "get", "give",
    "had", "has", "have", "how", "i", "id", "if", "in", "into", "is", "it", "its", "list", "many",
    "may", "me", "more", "most", "much", "my", "no", "not", "of", "on", "or", "our", "per",
    "please", "s", "shall", "should", "show", "so", "such", "tell", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were",
    "what", "which", "with",
];

/// Forms no suffix rule reaches; "sales" joins "sold" because questions use both.
const IRREGULAR: [(&str, &str); 9] = [
    ("sold", "sell"),
    ("sale", "sell"),
    ("sales", "sell"),
    ("paid", "pay"),
    ("bought", "buy"),
    ("spent", "spend"),
    ("lost", "loss"),
    ("lose", "loss"),
    ("people", "person"),
];

/// Words of a text, lower-cased: split on anything not a letter or digit and at
/// camelCase boundaries (`InvoiceLine` -> invoice, line; `HTTPServer` -> http, server).
pub fn words(text: &str) -> Vec<String> {
    crate::words::words(text, crate::words::Split::Identifier)
}

fn expand(word: String, identifier: bool) -> Vec<String> {
    let table = ABBREVIATIONS.iter().chain(
        identifier
            .then_some(IDENTIFIER_ABBREVIATIONS.iter())
            .into_iter()
            .flatten(),
    );
    for (short, long) in table {
        if *short == word {
            return long.iter().map(|w| w.to_string()).collect();
        }
    }
    vec![word]
}

fn is_stop_word(word: &str) -> bool {
    word.chars().count() < 2 && !word.chars().all(|c| c.is_ascii_digit())
        || STOP_WORDS.binary_search(&word).is_ok()
}

/// Search terms of a schema identifier (`cust_name` -> customer, name, stemmed).
pub fn identifier_terms(name: &str) -> Vec<String> {
    terms(name, true)
}

/// Search terms of English text (a question, a description).
pub fn text_terms(text: &str) -> Vec<String> {
    terms(text, false)
}

fn terms(text: &str, identifier: bool) -> Vec<String> {
    words(text)
        .into_iter()
        .flat_map(|word| expand(word, identifier))
        .filter(|word| !is_stop_word(word))
        .map(|word| stem(&word))
        .collect()
}

/// Every word of a text stemmed, nothing dropped: the form values and glossary phrases
/// are compared in, where "in" of "walk-in" and the "1" of "PVC Pipe 1 inch" matter.
pub fn phrase_terms(text: &str) -> Vec<String> {
    words(text).iter().map(|word| stem(word)).collect()
}

/// Every word with only its inflection removed (plural, -ed, -ing): the form values
/// are compared in. The full stemmer would let "payments" find the status 'PAID'.
pub fn value_terms(text: &str) -> Vec<String> {
    words(text)
        .iter()
        .map(|word| {
            if word.len() <= 3 || !word.chars().all(|c| c.is_ascii_lowercase()) {
                word.clone()
            } else {
                strip_final_e(strip_inflection(word.clone()))
            }
        })
        .collect()
}

/// Splits a word run together from two words of the vocabulary (`countrylanguage` ->
/// country, language), each at least three letters long; the first split found.
pub fn compound_parts(word: &str, vocabulary: &BTreeSet<String>) -> Option<(String, String)> {
    if word.len() < 6 || !word.is_ascii() {
        return None;
    }
    (3..=word.len() - 3).find_map(|cut| {
        let (left, right) = word.split_at(cut);
        (vocabulary.contains(left) && vocabulary.contains(right))
            .then(|| (left.to_string(), right.to_string()))
    })
}

/// Whether `needle` occurs as a contiguous run in `haystack`.
pub fn contains_run(haystack: &[String], needle: &[String]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

fn has_vowel(text: &str) -> bool {
    text.chars().any(|c| "aeiouy".contains(c))
}

/// A light English stemmer: plurals, -ed/-ing, a few derivational suffixes, final e
/// and y. It only has to send the forms of one word to one key (`suppliers`,
/// `supplied`, `supply` -> `suppli`), not to produce real words.
pub fn stem(word: &str) -> String {
    if let Some((_, base)) = IRREGULAR.iter().find(|(form, _)| *form == word) {
        return base.to_string();
    }
    if word.len() <= 3 || !word.chars().all(|c| c.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = strip_inflection(word.to_string());
    // Adverbs and adjectives in -ly (monthly -> month), but not supply or family.
    if let Some(base) = w.strip_suffix("ly") {
        if base.len() >= 4 && !base.ends_with(|c: char| "aeioup".contains(c)) {
            w = base.to_string();
        }
    }
    // One derivational suffix: transaction -> transact, payment -> pay,
    // supplier -> suppli.
    for (suffix, keep) in [("ion", 4), ("ment", 3), ("ness", 3), ("er", 4)] {
        if let Some(base) = w.strip_suffix(suffix) {
            let after_ts = suffix != "ion" || base.ends_with('t') || base.ends_with('s');
            if base.len() >= keep && after_ts {
                w = base.to_string();
            }
            break;
        }
    }
    w = strip_final_e(w);
    if w.len() > 3 && w.ends_with('y') {
        w.truncate(w.len() - 1);
        w.push('i');
    }
    w
}

/// Plurals, then past tense and gerund: the part of stemming values survive.
fn strip_inflection(mut w: String) -> String {
    // Plurals: classes -> class, categories -> categori, boxes -> box, bills -> bill.
    let es_plural = ["sses", "ies", "xes", "ches", "shes", "zes"]
        .iter()
        .any(|s| w.ends_with(s));
    if es_plural {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s)) {
        w.truncate(w.len() - 1);
    }
    // Past tense and gerund.
    if w.ends_with("ied") {
        w.truncate(w.len() - 2);
    } else if !w.ends_with("eed") {
        for suffix in ["ed", "ing"] {
            if let Some(base) = w.strip_suffix(suffix) {
                if base.len() >= 3 && has_vowel(base) {
                    let mut base = base.to_string();
                    let bytes = base.as_bytes();
                    let n = bytes.len();
                    // Undouble (shipped -> ship) but keep bill, pass, buzz.
                    if bytes[n - 1] == bytes[n - 2] && !b"lsz".contains(&bytes[n - 1]) {
                        base.truncate(n - 1);
                    }
                    w = base;
                }
                break;
            }
        }
    }
    w
}

fn strip_final_e(mut w: String) -> String {
    if w.len() >= 4 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

/// The fields of a table document, with how much a hit in each counts: a word in the
/// table's name says more about the table than the same word in its description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    TableName,
    ColumnName,
    Description,
}

impl Field {
    fn weight(self) -> f64 {
        match self {
            Field::TableName => 3.0,
            Field::ColumnName => 1.5,
            Field::Description => 1.0,
        }
    }
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// BM25 over tables (BM25F-style: field-weighted term frequencies in one document).
#[derive(Debug, Clone, Default)]
pub struct Bm25 {
    docs: Vec<BTreeMap<String, f64>>,
    lengths: Vec<f64>,
    average_length: f64,
    idf: BTreeMap<String, f64>,
}

impl Bm25 {
    /// One document per table: its terms, each tagged with the field it came from.
    pub fn new(documents: &[Vec<(Field, String)>]) -> Bm25 {
        let mut docs = Vec::new();
        let mut lengths = Vec::new();
        let mut document_frequency: BTreeMap<String, usize> = BTreeMap::new();
        for document in documents {
            let mut tf: BTreeMap<String, f64> = BTreeMap::new();
            for (field, term) in document {
                *tf.entry(term.clone()).or_default() += field.weight();
            }
            for term in tf.keys() {
                *document_frequency.entry(term.clone()).or_default() += 1;
            }
            lengths.push(tf.values().sum());
            docs.push(tf);
        }
        let n = docs.len() as f64;
        let average_length = if docs.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f64>() / n
        };
        let idf = document_frequency
            .into_iter()
            .map(|(term, df)| {
                let df = df as f64;
                (term, (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect();
        Bm25 {
            docs,
            lengths,
            average_length,
            idf,
        }
    }

    /// The score of every document for a query (each distinct term counted once).
    pub fn scores(&self, query: &[String]) -> Vec<f64> {
        let query: BTreeSet<&String> = query.iter().collect();
        self.docs
            .iter()
            .zip(&self.lengths)
            .map(|(tf, length)| {
                let norm = if self.average_length > 0.0 {
                    1.0 - B + B * length / self.average_length
                } else {
                    1.0
                };
                query
                    .iter()
                    .filter_map(|term| {
                        let f = *tf.get(*term)?;
                        let idf = self.idf.get(*term).copied().unwrap_or(0.0);
                        Some(idf * f * (K1 + 1.0) / (f + K1 * norm))
                    })
                    .sum()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS;
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn identifiers_split_and_expand() {
        assert_eq!(identifier_terms("cust_name"), vec!["custom", "nam"]);
        assert_eq!(words("InvoiceLine"), vec!["invoice", "line"]);
        assert_eq!(words("HTTPServer"), vec!["http", "server"]);
        assert_eq!(identifier_terms("po_id"), vec!["purchas", "order"]);
        assert_eq!(identifier_terms("bill_no"), vec!["bill", "numb"]);
        assert_eq!(text_terms("no customer"), vec!["custom"]);
    }

    #[test]
    fn forms_of_a_word_share_a_stem() {
        for group in [
            &["supplier", "suppliers", "supply", "supplied", "supplies"][..],
            &["customer", "customers"],
            &["category", "categories"],
            &["payment", "payments", "paid", "pay"],
            &["order", "orders", "ordered", "ordering"],
            &["bill", "bills", "billed", "billing"],
            &["receive", "received", "receiving"],
            &["sale", "sales", "sold", "selling"],
            &["manager", "managers", "manage"],
            &["transaction", "transactions"],
            &["quantity", "quantities"],
            &["adjustment", "adjustments", "adjusted"],
            &["date", "dates", "dated"],
        ] {
            let stems: BTreeSet<String> = group.iter().map(|w| stem(w)).collect();
            assert_eq!(stems.len(), 1, "{group:?} -> {stems:?}");
        }
        assert_eq!(text_terms("qty"), text_terms("quantities"));
        assert_eq!(text_terms("mgr"), text_terms("manager"));
    }

    #[test]
    fn bm25_prefers_the_name_field_and_rare_terms() {
        let doc = |pairs: &[(Field, &str)]| {
            pairs
                .iter()
                .map(|(f, t)| (*f, t.to_string()))
                .collect::<Vec<_>>()
        };
        let index = Bm25::new(&[
            doc(&[(Field::TableName, "custom"), (Field::ColumnName, "nam")]),
            doc(&[(Field::TableName, "bill"), (Field::Description, "custom")]),
            doc(&[(Field::TableName, "product"), (Field::ColumnName, "nam")]),
        ]);
        let scores = index.scores(&["custom".to_string()]);
        assert!(scores[0] > scores[1] && scores[1] > 0.0 && scores[2] == 0.0);
    }
}
