#!/usr/bin/env python3
"""A sqlglot guard making the same checks as askdb's guard (src/gate/guard.rs), timed
over the same corpus, for the side-by-side comparison of scripts/bench-peers.sh.

Checks, in askdb's order: the text parses into exactly one statement; it is a query
(SELECT or a set operation), with no data-modifying CTE, no SELECT INTO and no locking
clause; no denied function (askdb's list and prefixes, copied below); no system
catalog; every table is one of the database's own tables (or a CTE name); then the
LIMIT is forced to the row cap (kept when smaller, a set operation wrapped) and the
tree is rendered back to SQL.

Usage: sqlglot_guard.py CORPUS.jsonl OUT.json [ROUNDS]
CORPUS lines: {"set": ..., "db_path": ..., "sql": ..., "dialect": "sqlite" or "mysql"} (written by `cargo bench --bench
peers`); OUT gets {"queries", "rounds", "mean_us", "accepted", "sqlglot"}.
"""

import json
import sqlite3
import sys
import time

import sqlglot
from sqlglot import exp

ROW_CAP = 200

# askdb's DENIED_FUNCTIONS, DENIED_PREFIXES and ALLOWED_PG_FUNCTIONS (src/gate/guard.rs).
DENIED_FUNCTIONS = {
    "set_config", "nextval", "setval", "currval", "lastval", "txid_current",
    "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
    "gin_clean_pending_list", "binary_upgrade_set_next_pg_type_oid",
    "make_interval_from_file", "load_extension", "readfile", "writefile",
    "fts3_tokenizer", "edit", "fsdir", "zipfile", "sqlar_compress", "sqlar_uncompress",
}
DENIED_PREFIXES = ("pg_", "lo_", "dblink", "table_to_xml", "cursor_to_xml",
                   "schema_to_xml", "database_to_xml", "brin_", "binary_upgrade_")
ALLOWED_PG_FUNCTIONS = {"pg_typeof"}
CATALOG_SCHEMAS = {"pg_catalog", "information_schema", "pg_toast"}
# The MySQL dialect's additions: functions that reach outside the data or hold the
# server, and its system schemas.
MYSQL_DENIED_FUNCTIONS = {
    "load_file", "sleep", "benchmark", "get_lock", "release_lock", "release_all_locks",
    "is_free_lock", "is_used_lock", "master_pos_wait", "source_pos_wait", "connection_id",
    "database", "schema", "user", "current_user", "session_user", "system_user", "version",
    "found_rows", "row_count", "last_insert_id",
}
MYSQL_CATALOG_SCHEMAS = {"information_schema", "mysql", "performance_schema", "sys"}
CATALOG_PREFIXES = ("pg_", "sqlite_", "pragma_")


class Refused(Exception):
    pass


def denied(name, dialect="sqlite"):
    name = name.lower()
    if dialect == "mysql" and name in MYSQL_DENIED_FUNCTIONS:
        return True
    if name in ALLOWED_PG_FUNCTIONS:
        return False
    return name in DENIED_FUNCTIONS or name.startswith(DENIED_PREFIXES)


def function_name(node):
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    return node.sql_name()


def check(sql, tables, dialect="sqlite"):
    if dialect == "mysql" and "/*!" in sql:
        raise Refused("executable_comment")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.ParseError as error:
        raise Refused(f"parse_error: {error}")
    if len(statements) != 1:
        raise Refused("multiple_statements" if statements else "empty_statement")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise Refused("not_a_query")
    ctes = set()
    for cte in tree.find_all(exp.CTE):
        if not isinstance(cte.this, exp.Query):
            raise Refused("data_modifying_cte")
        ctes.add(cte.alias_or_name.lower())
    if tree.find(exp.Into) is not None:
        raise Refused("select_into")
    if tree.find(exp.Lock) is not None:
        raise Refused("locking_clause")
    if dialect == "mysql" and (
        tree.find(exp.SessionParameter) is not None or tree.find(exp.Parameter) is not None
    ):
        raise Refused("system_or_user_variable")
    for function in tree.find_all(exp.Func):
        if denied(function_name(function), dialect):
            raise Refused("denied_function")
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        schema = (table.db or "").lower()
        catalogs = MYSQL_CATALOG_SCHEMAS if dialect == "mysql" else CATALOG_SCHEMAS
        if schema in catalogs or name.startswith(CATALOG_PREFIXES):
            raise Refused("system_catalog")
        if name in ctes and not schema:
            continue
        if name not in tables:
            raise Refused("unknown_table")
    # The forced LIMIT: kept when smaller, else the cap; set operations are wrapped so
    # the cap covers all of them.
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        tree = exp.select("*").from_(tree.subquery("q")).limit(ROW_CAP)
    else:
        limit = tree.args.get("limit")
        keep = False
        if limit is not None:
            value = limit.expression if isinstance(limit, exp.Limit) else None
            if isinstance(value, exp.Literal) and value.is_int and int(value.this) <= ROW_CAP:
                keep = True
        if not keep:
            tree = tree.limit(ROW_CAP)
    return tree.sql(dialect=dialect)


def database_tables(path):
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
    finally:
        connection.close()
    return {name.lower() for (name,) in rows if not name.lower().startswith("sqlite_")}


def main():
    corpus_path, out_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    corpus = [json.loads(line) for line in open(corpus_path, encoding="utf-8") if line.strip()]
    tables = {}
    for item in corpus:
        if item["db_path"] not in tables:
            tables[item["db_path"]] = database_tables(item["db_path"])
    accepted = 0
    total_ns = 0
    for round_number in range(rounds):
        for item in corpus:
            allowed = tables[item["db_path"]]
            started = time.perf_counter_ns()
            try:
                check(item["sql"], allowed, item.get("dialect", "sqlite"))
                ok = True
            except Refused:
                ok = False
            except Exception:  # sqlglot's own failures count as refusals, as in askdb
                ok = False
            total_ns += time.perf_counter_ns() - started
            if round_number == 0 and ok:
                accepted += 1
    figures = {
        "queries": len(corpus),
        "rounds": rounds,
        "mean_us": total_ns / 1000 / (len(corpus) * rounds),
        "accepted": accepted,
        "sqlglot": sqlglot.__version__,
        "python": sys.version.split()[0],
    }
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump(figures, out, indent=2)
        out.write("\n")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
