//! The architecture's invariants as a test that reads the source (in the spirit of
//! rust-analyzer's tidy tests). Every rule is stated in ARCHITECTURE.md; the layering is
//! read from ARCHITECTURE.md's own table, so the document and the test cannot drift.
//!
//! Rules, for library code outside tests (`#[cfg(test)]` items, `tests.rs` and
//! `*_tests.rs` files are test code):
//! - a module uses only modules of lower layers (and itself);
//! - a database crate (rusqlite, tokio-postgres, deadpool-postgres, mysql_async) is used
//!   only in the gate, the administration module, the demo writer, the query log's writer,
//!   the verified examples' store and the replicas' shared state;
//! - no `unwrap()` or `expect()`, and no `panic!`, `unreachable!`, `todo!` or
//!   `unimplemented!`;
//! - a model's messages (`Message`, `ModelRequest`) are built only in
//!   `src/agent/prompts.rs`, and a provider in `src/llm/` sends only the request's own
//!   text, framed in its API's JSON;
//! - an executor never commits and never uses PostgreSQL's simple query protocol;
//! - the two doors below the guard are called only from their one caller each;
//! - a file is at most 1,000 lines (data tables aside);
//!
//! and for every Rust file of src/, tests/ and benches/: it starts with a `//!` line.
//! Each rule is proved by feeding the checker a small bad example.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::buffer::{Cursor, TokenBuffer};
use syn::punctuated::Punctuated;
use syn::visit::Visit;

/// Module -> layer, from ARCHITECTURE.md's layering table.
type Layers = BTreeMap<String, u32>;

const LAYERING_BEGIN: &str = "<!-- layering:begin -->";
const LAYERING_END: &str = "<!-- layering:end -->";

const DATABASE_CRATES: [&str; 4] = [
    "rusqlite",
    "tokio_postgres",
    "deadpool_postgres",
    "mysql_async",
];
const DATABASE_MODULES: [&str; 7] = [
    "gate",
    "admin",
    "demo",
    "querylog",
    "examples",
    "conversation",
    "state",
];
/// OpenTelemetry stays behind one module: the agent and the server feed it events.
const TELEMETRY_CRATES: [&str; 3] = ["opentelemetry", "opentelemetry_sdk", "opentelemetry_otlp"];

/// Gate methods that reach below the guard, and the one file (or folder) each may be
/// called from outside the gate.
const GUARDED_DOORS: [(&str, &str); 2] = [
    ("run_benchmark_gold_as_written", "src/eval/guard_check.rs"),
    ("probe_read_only", "src/server/health.rs"),
];

/// Macros that end the process on a path the code did not expect: input must never
/// reach one in library code.
const PANICKING_MACROS: [&str; 4] = ["panic", "unreachable", "todo", "unimplemented"];

/// Where the text sent to a model may be assembled: prompts.rs with its conversation.rs,
/// and src/llm/mod.rs, whose `Message` and `ModelRequest` constructors name their own
/// types.
const PROMPT_FILES: [&str; 3] = [
    "src/agent/prompts.rs",
    "src/agent/prompts/conversation.rs",
    "src/llm/mod.rs",
];

/// `Message`'s constructors: each one makes a turn of text the model reads.
const MESSAGE_CONSTRUCTORS: [&str; 4] = ["system", "stable_system", "user", "assistant"];

/// The fields of a provider's request body that the model reads as text.
const TEXT_FIELDS: [&str; 2] = ["text", "content"];

/// Text a provider adds to a request that does not come from the request's messages:
/// (file, the function that makes it, why it is not prompts.rs's). Anthropic's Messages
/// API has no `response_format`, so its adapter states the request's JSON schema in one
/// fixed sentence: the provider's stand-in for OpenAI's schema parameter, the same for
/// every request that carries a schema. `llm` sits below `agent` and cannot take the
/// sentence from prompts.rs; moving it there means prompts.rs passes it with the schema.
const PROVIDER_TEXT_ALLOWED: [(&str, &str); 0] = [];

/// The longest a library file may be: past it, a file holds more than one concern.
const MAX_LINES: usize = 1_000;

/// Library files allowed past [`MAX_LINES`]: data tables, whose length is their content,
/// and files whose split is under way (each to leave this list when it lands).
const LONG_FILES_ALLOWED: [&str; 2] = ["src/agent/mod.rs", "src/agent/plausibility.rs"];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    file: String,
    rule: &'static str,
    detail: String,
}

fn parse_layers(architecture: &str) -> Layers {
    let start = architecture
        .find(LAYERING_BEGIN)
        .expect("ARCHITECTURE.md has the layering markers");
    let end = architecture
        .find(LAYERING_END)
        .expect("ARCHITECTURE.md has the layering end marker");
    let mut layers = Layers::new();
    for line in architecture[start..end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | layer | modules | ... |
        let (Some(layer), Some(modules)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Ok(layer) = layer.parse::<u32>() else {
            continue;
        };
        for module in modules.split(',') {
            let module = module.trim().trim_matches('`');
            if !module.is_empty() {
                layers.insert(module.to_string(), layer);
            }
        }
    }
    layers
}

/// The top-level module a source file belongs to (`src/gate/guard.rs` -> gate).
fn module_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    Some(first.trim_end_matches(".rs").to_string())
}

fn is_test_file(path: &str) -> bool {
    !path.starts_with("src/")
        || path.ends_with("/tests.rs")
        || path.ends_with("_tests.rs")
        || path.contains("/tests/")
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                list.tokens
                    .to_string()
                    .split_whitespace()
                    .any(|t| t == "test")
            })
    })
}

struct Scan<'a> {
    path: &'a str,
    module: String,
    layers: &'a Layers,
    found: Vec<Violation>,
}

impl Scan<'_> {
    fn flag(&mut self, rule: &'static str, detail: String) {
        self.found.push(Violation {
            file: self.path.to_string(),
            rule,
            detail,
        });
    }

    fn uses_module(&mut self, used: &str) {
        if used == self.module || self.module == "main" || self.module == "lib" {
            return;
        }
        let (Some(own), Some(other)) = (self.layers.get(&self.module), self.layers.get(used))
        else {
            self.flag(
                "layering",
                format!(
                    "{} uses crate::{used}, and one of them is missing from ARCHITECTURE.md's layering",
                    self.module
                ),
            );
            return;
        };
        if other >= own {
            self.flag(
                "layering",
                format!(
                    "{} (layer {own}) uses crate::{used} (layer {other}): only lower layers may be used",
                    self.module
                ),
            );
        }
    }

    fn first_segment(&mut self, first: &str, second: Option<String>) {
        if first == "crate" {
            if let Some(second) = second {
                self.uses_module(&second);
            }
        } else if DATABASE_CRATES.contains(&first)
            && !DATABASE_MODULES.contains(&self.module.as_str())
        {
            self.flag(
                "database crate outside the gate",
                format!("{} uses {first}", self.module),
            );
        } else if TELEMETRY_CRATES.contains(&first) && self.module != "telemetry" {
            self.flag(
                "OpenTelemetry outside src/telemetry",
                format!("{} uses {first}", self.module),
            );
        }
    }

    fn in_executor(&self) -> bool {
        self.path.starts_with("src/gate/executor/")
    }

    fn builds_prompts(&self) -> bool {
        PROMPT_FILES.contains(&self.path)
    }

    fn panicking_macro(&mut self, name: &str, words: &str) {
        if !PANICKING_MACROS.contains(&name) {
            return;
        }
        self.flag(
            "no panic!, unreachable!, todo! or unimplemented! outside tests",
            format!("{name}! in {} ({words})", self.path),
        );
    }

    /// Nested macro calls are only tokens to syn: `name ! (...)` is found by hand.
    fn nested_macros(&mut self, cursor: Cursor) {
        let tokens = tokens_of(cursor);
        for (index, token) in tokens.iter().enumerate() {
            match (token, tokens.get(index + 1), tokens.get(index + 2)) {
                (Token::Ident(name), Some(Token::Punct('!')), Some(Token::Group(inner))) => {
                    self.panicking_macro(name, &words_of(*inner));
                }
                (Token::Group(inner), _, _) => self.nested_macros(*inner),
                _ => {}
            }
        }
    }

    /// In a provider's JSON body, a text field's value must be the request's own text (a
    /// variable or a field of one, possibly trimmed): a literal, a call or a macro there
    /// writes words of its own for the model.
    fn provider_text(&mut self, cursor: Cursor) {
        let tokens = tokens_of(cursor);
        for (index, token) in tokens.iter().enumerate() {
            let key = match token {
                Token::Group(inner) => {
                    self.provider_text(*inner);
                    continue;
                }
                Token::Literal(key) => key,
                _ => continue,
            };
            let is_text_field = TEXT_FIELDS
                .iter()
                .any(|field| *key == format!("\"{field}\""));
            if !is_text_field || tokens.get(index + 1) != Some(&Token::Punct(':')) {
                continue;
            }
            let made_here = match (tokens.get(index + 2), tokens.get(index + 3)) {
                (Some(Token::Literal(literal)), _) => literal.clone(),
                (Some(Token::Ident(function)), Some(Token::Group(_) | Token::Punct('!'))) => {
                    function.clone()
                }
                _ => continue,
            };
            let allowed = PROVIDER_TEXT_ALLOWED
                .iter()
                .any(|(file, function)| self.path == *file && made_here == *function);
            if !allowed {
                self.flag(
                    "model messages are built only in src/agent/prompts.rs (and its conversation.rs)",
                    format!(
                        "a provider writes its own {key} for the model ({made_here}) in {}",
                        self.path
                    ),
                );
            }
        }
    }
}

/// One token of a macro's input, as far as the rules need it.
#[derive(PartialEq)]
enum Token<'a> {
    Ident(String),
    Punct(char),
    Literal(String),
    Group(Cursor<'a>),
    Other,
}

/// The tokens at one level of nesting; a group's contents stay behind its cursor.
fn tokens_of(mut cursor: Cursor) -> Vec<Token> {
    let mut tokens = Vec::new();
    while !cursor.eof() {
        if let Some((inner, _, _, next)) = cursor.any_group() {
            tokens.push(Token::Group(inner));
            cursor = next;
        } else if let Some((ident, next)) = cursor.ident() {
            tokens.push(Token::Ident(ident.to_string()));
            cursor = next;
        } else if let Some((punct, next)) = cursor.punct() {
            tokens.push(Token::Punct(punct.as_char()));
            cursor = next;
        } else if let Some((literal, next)) = cursor.literal() {
            tokens.push(Token::Literal(literal.to_string()));
            cursor = next;
        } else if let Some((_, next)) = cursor.token_tree() {
            tokens.push(Token::Other);
            cursor = next;
        } else {
            break;
        }
    }
    tokens
}

/// The text of the tokens behind a cursor, to match a macro's message.
fn words_of(cursor: Cursor) -> String {
    cursor.token_stream().to_string()
}

fn use_tree_root(tree: &syn::UseTree) -> Vec<(String, Option<String>)> {
    match tree {
        syn::UseTree::Path(path) => {
            let first = path.ident.to_string();
            let seconds: Vec<Option<String>> = match path.tree.as_ref() {
                syn::UseTree::Path(inner) => vec![Some(inner.ident.to_string())],
                syn::UseTree::Name(name) => vec![Some(name.ident.to_string())],
                syn::UseTree::Rename(rename) => vec![Some(rename.ident.to_string())],
                syn::UseTree::Group(group) => group
                    .items
                    .iter()
                    .map(|item| match item {
                        syn::UseTree::Path(inner) => Some(inner.ident.to_string()),
                        syn::UseTree::Name(name) => Some(name.ident.to_string()),
                        syn::UseTree::Rename(rename) => Some(rename.ident.to_string()),
                        _ => None,
                    })
                    .collect(),
                syn::UseTree::Glob(_) => vec![None],
            };
            seconds
                .into_iter()
                .map(|second| (first.clone(), second))
                .collect()
        }
        syn::UseTree::Name(name) => vec![(name.ident.to_string(), None)],
        syn::UseTree::Rename(rename) => vec![(rename.ident.to_string(), None)],
        syn::UseTree::Group(group) => group.items.iter().flat_map(use_tree_root).collect(),
        syn::UseTree::Glob(_) => Vec::new(),
    }
}

impl<'ast> Visit<'ast> for Scan<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            syn::Item::Const(item) => &item.attrs,
            syn::Item::Static(item) => &item.attrs,
            syn::Item::Struct(item) => &item.attrs,
            syn::Item::Enum(item) => &item.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        for (first, second) in use_tree_root(&item.tree) {
            self.first_segment(&first, second);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut segments = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string());
        if let Some(first) = segments.next() {
            let second = segments.next();
            self.first_segment(&first, second);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(name) = mac.path.segments.last() {
            let name = name.ident.to_string();
            self.panicking_macro(&name, &mac.tokens.to_string());
            let buffer = TokenBuffer::new2(mac.tokens.clone());
            if name == "json" && self.path.starts_with("src/llm/") {
                self.provider_text(buffer.begin());
            }
            // Most macros (vec!, format!, assert!) take expressions: those are checked
            // like any other code. The rest are only tokens, searched for macro calls.
            match mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated) {
                Ok(arguments) => {
                    for argument in &arguments {
                        self.visit_expr(argument);
                    }
                }
                Err(_) => self.nested_macros(buffer.begin()),
            }
        }
        syn::visit::visit_macro(self, mac);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(function) = call.func.as_ref() {
            let names: Vec<String> = function
                .path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            let built = match names.as_slice() {
                [.., ty, constructor]
                    if ty == "Message" && MESSAGE_CONSTRUCTORS.contains(&constructor.as_str()) =>
                {
                    Some(format!("Message::{constructor}"))
                }
                [.., ty, constructor] if ty == "ModelRequest" && constructor == "new" => {
                    Some("ModelRequest::new".to_string())
                }
                _ => None,
            };
            if let (Some(built), false) = (built, self.builds_prompts()) {
                self.flag(
                    "model messages are built only in src/agent/prompts.rs (and its conversation.rs)",
                    format!("{built} in {}", self.path),
                );
            }
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_expr_struct(&mut self, literal: &'ast syn::ExprStruct) {
        let ty = literal
            .path
            .segments
            .last()
            .map(|segment| segment.ident.to_string());
        if let (Some(ty), false) = (ty, self.builds_prompts()) {
            if ty == "Message" || ty == "ModelRequest" {
                self.flag(
                    "model messages are built only in src/agent/prompts.rs (and its conversation.rs)",
                    format!("a {ty} literal in {}", self.path),
                );
            }
        }
        syn::visit::visit_expr_struct(self, literal);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = call.method.to_string();
        if method == "unwrap" || method == "expect" {
            self.flag(
                "no unwrap or expect outside tests",
                format!(".{method}() in {}", self.path),
            );
        }
        if self.in_executor() && (method == "simple_query" || method == "batch_execute") {
            self.flag(
                "one statement per call in an executor",
                format!(".{method}() runs stacked statements"),
            );
        }
        for (door, caller) in GUARDED_DOORS {
            if method == door
                && !self.path.starts_with(caller)
                && !self.path.starts_with("src/gate/")
            {
                self.flag(
                    "doors below the guard have one caller",
                    format!("{door} called from {} (only {caller} may)", self.path),
                );
            }
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        if self.in_executor() {
            let value = literal.value().to_lowercase();
            let words: Vec<&str> = value
                .split(|c: char| !c.is_alphanumeric())
                .filter(|word| !word.is_empty())
                .collect();
            // END is PostgreSQL's synonym for COMMIT.
            if words.contains(&"commit") || words.first() == Some(&"end") {
                self.flag(
                    "no COMMIT in an executor",
                    format!(
                        "string {:?} would make a transaction permanent",
                        literal.value()
                    ),
                );
            }
        }
    }
}

/// Every rule over one file. `path` is relative to the repository, with `/`.
fn check_file(path: &str, source: &str, layers: &Layers) -> Vec<Violation> {
    let mut found = Vec::new();
    let first_line = source.lines().find(|line| !line.trim().is_empty());
    if !first_line.is_some_and(|line| line.starts_with("//!")) {
        found.push(Violation {
            file: path.to_string(),
            rule: "every file starts with a //! line",
            detail: "the first line is not a //! module doc".to_string(),
        });
    }
    if is_test_file(path) {
        return found;
    }
    let lines = source.lines().count();
    if lines > MAX_LINES && !LONG_FILES_ALLOWED.contains(&path) {
        found.push(Violation {
            file: path.to_string(),
            rule: "a library file is at most 1,000 lines",
            detail: format!("{lines} lines: split it along its seams"),
        });
    }
    let Some(module) = module_of(path) else {
        return found;
    };
    let file = match syn::parse_file(source) {
        Ok(file) => file,
        Err(error) => {
            found.push(Violation {
                file: path.to_string(),
                rule: "the source parses",
                detail: error.to_string(),
            });
            return found;
        }
    };
    let mut scan = Scan {
        path,
        module,
        layers,
        found: Vec::new(),
    };
    scan.visit_file(&file);
    found.extend(scan.found);
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn repository_layers() -> Layers {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    parse_layers(&architecture)
}

#[test]
fn the_source_keeps_every_rule_of_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layers = repository_layers();
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "the scan found the sources: {}",
        files.len()
    );
    let mut violations = Vec::new();
    let mut modules = std::collections::BTreeSet::new();
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .expect("inside the repository")
            .to_string_lossy()
            .replace('\\', "/");
        if let Some(module) = module_of(&relative) {
            modules.insert(module);
        }
        let source = std::fs::read_to_string(file).expect("readable");
        violations.extend(check_file(&relative, &source, &layers));
    }
    let shown: Vec<String> = violations
        .iter()
        .map(|v| format!("{} [{}]: {}", v.file, v.rule, v.detail))
        .collect();
    assert!(shown.is_empty(), "{}", shown.join("\n"));
    // Every module of the library has a layer: a new one must be placed on purpose.
    for module in modules {
        if module != "main" && module != "lib" {
            assert!(
                layers.contains_key(&module),
                "src/{module} has no layer in ARCHITECTURE.md"
            );
        }
    }
}

fn sample_layers() -> Layers {
    parse_layers(
        "<!-- layering:begin -->\n| layer | modules |\n|---|---|\n| 0 | text |\n| 2 | gate |\n| 6 | agent |\n<!-- layering:end -->",
    )
}

fn rules_broken(path: &str, source: &str) -> Vec<&'static str> {
    check_file(path, source, &sample_layers())
        .into_iter()
        .map(|violation| violation.rule)
        .collect()
}

#[test]
fn the_layering_table_is_read_from_the_document() {
    let layers = sample_layers();
    assert_eq!(layers.get("gate"), Some(&2));
    assert_eq!(layers.get("agent"), Some(&6));
    let real = repository_layers();
    assert!(real.get("gate") < real.get("agent"), "{real:?}");
}

#[test]
fn a_module_that_uses_a_higher_layer_is_caught() {
    let bad = "//! gate\nuse crate::agent::Agent;\nfn f() {}\n";
    assert_eq!(rules_broken("src/gate/mod.rs", bad), vec!["layering"]);
    let in_a_path = "//! gate\nfn f() { let _ = crate::agent::MAX_ATTEMPTS; }\n";
    assert_eq!(rules_broken("src/gate/mod.rs", in_a_path), vec!["layering"]);
    let grouped = "//! gate\nuse crate::{text::cut_text, agent::Agent};\n";
    assert_eq!(rules_broken("src/gate/mod.rs", grouped), vec!["layering"]);
    let fine = "//! agent\nuse crate::gate::Gate;\nuse crate::text::cut_text;\n";
    assert!(rules_broken("src/agent/mod.rs", fine).is_empty());
    // Test code may reach anywhere.
    let in_tests = "//! gate\n#[cfg(test)]\nmod tests { use crate::agent::Agent; }\n";
    assert!(rules_broken("src/gate/mod.rs", in_tests).is_empty());
    // A doc comment naming a higher module is not a use.
    let doc = "//! gate, opened by [`crate::agent`]\nfn f() {}\n";
    assert!(rules_broken("src/gate/mod.rs", doc).is_empty());
}

#[test]
fn a_database_crate_outside_the_gate_is_caught() {
    let bad = "//! agent\nfn f(_: rusqlite::Connection) {}\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", bad),
        vec!["database crate outside the gate"]
    );
    let fine = "//! gate\nuse rusqlite::Connection;\n";
    assert!(rules_broken("src/gate/executor/sqlite.rs", fine).is_empty());
    let mysql = "//! agent\nfn f(_: mysql_async::Conn) {}\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", mysql),
        vec!["database crate outside the gate"]
    );
}

#[test]
fn opentelemetry_outside_the_telemetry_module_is_caught() {
    let bad = "//! agent\nfn f(_: opentelemetry::KeyValue) {}\n";
    assert_eq!(
        rules_broken("src/agent/events.rs", bad),
        vec!["OpenTelemetry outside src/telemetry"]
    );
    let grouped = "//! server\nuse opentelemetry_sdk::trace::SdkTracer;\n";
    assert_eq!(
        rules_broken("src/server/api.rs", grouped),
        vec!["OpenTelemetry outside src/telemetry"]
    );
    let fine = "//! telemetry\nuse opentelemetry::KeyValue;\n";
    assert!(rules_broken("src/telemetry/spans.rs", fine).is_empty());
}

#[test]
fn unwrap_and_expect_outside_tests_are_caught() {
    let bad = "//! agent\nfn f(x: Option<u8>) -> u8 { x.unwrap() }\nfn g(x: Option<u8>) -> u8 { x.expect(\"no\") }\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", bad),
        vec![
            "no unwrap or expect outside tests",
            "no unwrap or expect outside tests"
        ]
    );
    let in_a_macro = "//! agent\nfn f(x: Option<u8>) -> String { format!(\"{}\", x.unwrap()) }\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", in_a_macro),
        vec!["no unwrap or expect outside tests"]
    );
    let fine = "//! agent\nfn f(x: Option<u8>) -> u8 { x.unwrap_or(0) }\n#[cfg(test)]\nmod tests { fn t() { Some(1).unwrap(); } }\n";
    assert!(rules_broken("src/agent/mod.rs", fine).is_empty());
    assert!(rules_broken(
        "src/agent/tests.rs",
        "//! t\nfn t() { Some(1).unwrap(); }\n"
    )
    .is_empty());
}

#[test]
fn a_commit_or_the_simple_protocol_in_an_executor_is_caught() {
    let commit = "//! executor\nfn f(c: &C) { c.run(\"COMMIT\"); }\n";
    assert_eq!(
        rules_broken("src/gate/executor/postgres.rs", commit),
        vec!["no COMMIT in an executor"]
    );
    let end = "//! executor\nfn f(c: &C) { c.run(\"end\"); }\n";
    assert_eq!(
        rules_broken("src/gate/executor/postgres.rs", end),
        vec!["no COMMIT in an executor"]
    );
    let simple = "//! executor\nfn f(c: &C) { c.batch_execute(\"SELECT 1; SELECT 2\"); }\n";
    assert_eq!(
        rules_broken("src/gate/executor/postgres.rs", simple),
        vec!["one statement per call in an executor"]
    );
    let fine =
        "//! executor\nfn f(c: &C) { c.run(\"ROLLBACK\"); c.run(\"SELECT 'committee'\"); }\n";
    assert!(rules_broken("src/gate/executor/postgres.rs", fine).is_empty());
}

#[test]
fn a_door_below_the_guard_called_from_elsewhere_is_caught() {
    let bad = "//! agent\nasync fn f(g: &Gate) { g.run_benchmark_gold_as_written(\"x\").await; }\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", bad),
        vec!["doors below the guard have one caller"]
    );
}

#[test]
fn a_file_without_its_module_doc_is_caught() {
    assert_eq!(
        rules_broken("src/agent/mod.rs", "// a plain comment\nfn f() {}\n"),
        vec!["every file starts with a //! line"]
    );
    assert_eq!(
        rules_broken("tests/cli.rs", "use std::io;\n"),
        vec!["every file starts with a //! line"]
    );
}

const PANIC_RULE: &str = "no panic!, unreachable!, todo! or unimplemented! outside tests";
const PROMPTS_RULE: &str =
    "model messages are built only in src/agent/prompts.rs (and its conversation.rs)";

#[test]
fn a_panicking_macro_outside_tests_is_caught() {
    for name in PANICKING_MACROS {
        let bad = format!("//! agent\nfn f() {{ {name}!(\"no\") }}\n");
        assert_eq!(
            rules_broken("src/agent/mod.rs", &bad),
            vec![PANIC_RULE],
            "{name}"
        );
    }
    // In a closure, and inside another macro's input.
    let nested = "//! agent\nfn f(x: Option<u8>) -> u8 { x.unwrap_or_else(|| unreachable!()) }\nfn g() -> String { format!(\"{}\", todo!()) }\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", nested),
        vec![PANIC_RULE, PANIC_RULE]
    );
    let fine = "//! agent\nfn f() -> u8 { 0 }\n#[cfg(test)]\nmod tests { fn t() { panic!(\"a test may\"); } }\n";
    assert!(rules_broken("src/agent/mod.rs", fine).is_empty());
    assert!(rules_broken("src/agent/tests.rs", "//! t\nfn t() { todo!() }\n").is_empty());
    let other = "//! e\nfn f() { unreachable!(\"another\") }\n";
    assert_eq!(
        rules_broken("src/gate/executor/postgres.rs", other),
        vec![PANIC_RULE]
    );
}

#[test]
fn a_model_message_built_outside_prompts_is_caught() {
    let ping = "//! server\nfn f() -> ModelRequest { ModelRequest::new(Purpose::Check, \"check\", vec![Message::system(\"Reply with ok\"), Message::user(\"ping\")]) }\n";
    assert_eq!(
        rules_broken("src/server/health.rs", ping),
        vec![PROMPTS_RULE, PROMPTS_RULE, PROMPTS_RULE]
    );
    let in_a_macro = "//! cli\nfn f() -> Vec<Message> { vec![Message::user(\"ping\")] }\n";
    assert_eq!(
        rules_broken("src/cli/mod.rs", in_a_macro),
        vec![PROMPTS_RULE]
    );
    let literal = "//! agent\nfn f(text: String) -> Message { Message { role: Role::User, content: text, stable: false } }\n";
    assert_eq!(
        rules_broken("src/agent/mod.rs", literal),
        vec![PROMPTS_RULE]
    );
    assert!(rules_broken("src/agent/prompts.rs", ping).is_empty());
    assert!(rules_broken("src/agent/prompts.rs", literal).is_empty());
    // Reading a request's messages is not building them.
    let reading = "//! agent\nfn f(r: &ModelRequest) -> usize { r.messages.len() }\n";
    assert!(rules_broken("src/agent/mod.rs", reading).is_empty());
}

#[test]
fn a_provider_writing_its_own_words_is_caught() {
    let call = "//! llm\nfn f(m: &Message) -> Value { json!({\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": words(m)}]}) }\n";
    assert_eq!(rules_broken("src/llm/openai.rs", call), vec![PROMPTS_RULE]);
    let literal =
        "//! llm\nfn f() -> Value { json!({\"role\": \"user\", \"content\": \"ping\"}) }\n";
    assert_eq!(
        rules_broken("src/llm/openai.rs", literal),
        vec![PROMPTS_RULE]
    );
    let formatted = "//! llm\nfn f(q: &str) -> Value { json!({\"text\": format!(\"Q: {q}\")}) }\n";
    assert_eq!(
        rules_broken("src/llm/anthropic.rs", formatted),
        vec![PROMPTS_RULE]
    );
    // The request's own text, framed in the API's JSON.
    let framing = "//! llm\nfn f(message: &Message, prefill: &str, block: Value) -> Vec<Value> { vec![json!({\"role\": role, \"content\": message.content}), json!({\"type\": \"text\", \"text\": prefill.trim_end()}), json!({\"role\": \"user\", \"content\": [block]})] }\n";
    assert!(rules_broken("src/llm/openai.rs", framing).is_empty());
    // Words made by a provider's own function are caught too.
    let schema = "//! llm\nfn f(schema: &Value) -> Value { json!({\"type\": \"text\", \"text\": json_instruction(schema)}) }\n";
    assert_eq!(
        rules_broken("src/llm/anthropic.rs", schema),
        vec![PROMPTS_RULE]
    );
}

#[test]
fn a_library_file_over_a_thousand_lines_is_caught() {
    let long = format!("//! events\n{}", "fn f() {}\n".repeat(MAX_LINES));
    assert_eq!(
        rules_broken("src/agent/events.rs", &long),
        vec!["a library file is at most 1,000 lines"]
    );
    let at_the_limit = format!("//! events\n{}", "fn f() {}\n".repeat(MAX_LINES - 1));
    assert!(rules_broken("src/agent/events.rs", &at_the_limit).is_empty());
    // Tests may be long, and so may the files named on purpose.
    assert!(rules_broken("src/agent/tests.rs", &long).is_empty());
    assert!(rules_broken(LONG_FILES_ALLOWED[0], &long).is_empty());
}
