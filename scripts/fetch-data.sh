#!/usr/bin/env bash
# fetch-data.sh: downloads the external benchmark data that askdb's tests and evaluations
# read (see src/eval/external.rs and ../shared/data/README.md) from the upstream
# repositories, pinned to the commits the project was developed against.
#
# Usage: scripts/fetch-data.sh [TARGET_DIR]
#   TARGET_DIR defaults to ../shared/data relative to the repository root, which is where
#   askdb looks (ASKDB_SHARED_DATA overrides that; see src/home.rs).
#
# Files that already exist are left alone, so the script can be re-run after a failure.
# Two sets of SQLite files are not published upstream and are built here instead:
#   - defog/sqlite/<db>.db: from the PostgreSQL dumps with defog-data's own translation
#     code (needs python3 with the sqlglot package); skipped with a message otherwise.
#     The result depends on the sqlglot version (some fail to translate a few statements:
#     those databases are reported and skipped), and the dumps compute some dates from
#     the current date, so the files are never byte-identical to another build.
#   - spiderman/sqlite/<db>.sqlite: from SpiderMan's MySQL schema and CSV data (needs
#     python3, standard library only); skipped with a message otherwise.
# Downloaded files are checked against the SHA-256 sums of the copies the project was
# developed against; a mismatch is reported as a warning, not an error.
# Requires: bash, curl; optionally python3 and sha256sum.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${1:-$REPO_ROOT/../shared/data}"

CHINOOK_REPO=lerocha/chinook-database
CHINOOK_COMMIT=7f67772503d71ba90f19283c38e93923addb43fa
DEFOG_DATA_REPO=defog-ai/defog-data
DEFOG_DATA_COMMIT=856295d8f0aa8a0b0fb71b9623e86f363469797a
SQL_EVAL_REPO=defog-ai/sql-eval
SQL_EVAL_COMMIT=b83332416ea2d424b0cd12994a0a9ba100f4b4af
SPIDER_REPO=taoyds/spider
SPIDER_COMMIT=b7b5b8c890cd30e35427348bb9eb8c6d1350ca7c
SPIDERMAN_REPO=cloudera/spiderman
SPIDERMAN_COMMIT=c11367b8dbe1e693dab376ee4ac41ef0072691cd
# SParC's dev set as editsql keeps it (the upstream file, with the token and parse fields
# askdb's loader ignores; it reads `interaction` as `turns`).
SPARC_REPO=ryanzhumich/editsql
SPARC_COMMIT=741710a

DEFOG_DBS=(academic advising atis broker car_dealership derm_treatment ewallet geography
    restaurants scholar yelp)
DEFOG_QUESTION_FILES=(questions_gen_postgres questions_gen_sqlite instruct_basic_postgres
    instruct_basic_sqlite instruct_advanced_postgres instruct_advanced_sqlite idk)
# Spider's 20 dev databases: the ones spiderman/test_queries.csv asks about.
SPIDERMAN_DBS=(battle_death car_1 concert_singer course_teach cre_Doc_Template_Mgt dog_kennels
    employee_hire_evaluation flight_2 museum_visit network_1 orchestra pets_1 poker_player
    real_estate_properties singer student_transcripts_tracking tvshow voter_1 world_1 wta_1)

# SHA-256 of the files as the project uses them, by path relative to TARGET.
EXPECTED_SHA256="
e3fde5c1a5b51a2a91429a702c9ca6e69ba56e6c7f5e112724d70c3d03db695e chinook/Chinook_PostgreSql.sql
7651ba378ac2fcd0dfc3c66fb101f7a7eed3ba39a612ec642b96e20702061f15 chinook/Chinook_Sqlite.sqlite
5064d720db431474b0a0b0cef9d2b5e362b6c6f80602b35c6443b07cbc979f77 chinook/LICENSE.md
35bb6194c3fdf42aec14c5f83e38a0d235be106c0319ae58790b9f8b4b4056ff sparc/LICENSE-editsql
c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4 defog/LICENSE
9dc990157e7650f74abd3bc11ac7591e3f0efa4ad234cd4a466230cd83e1610d defog/postgres/academic.json
b107573b8724c3bad01496e284c870f6c91ca1186ce80307bdc914dce6a305c6 defog/postgres/academic.sql
5b4cc664489f3c2658a70b930ba6926b84b3843717deb88d6f83f88901b33ef6 defog/postgres/advising.json
d218fd134251ae5fd04f08ac94241a06a0967f5634bc235fc50b37dd55b58732 defog/postgres/advising.sql
741363da35cf2b8190fea45fecd5e8c2335ffae5f8388a977ee4d75cc9893a1a defog/postgres/atis.json
eac836d06e1d09af95ec52d0697b9ff3f3d5e36aad528924c975933a84b15f84 defog/postgres/atis.sql
6851c4fb52d46753b0dfc7acf2a7205a7a4bf0504fb0691fd859e648540d4970 defog/postgres/broker.json
c68ec1740238880aeff7426040f5a486f1af9e0f5d16e6db6f9ff80d1bbbf158 defog/postgres/broker.sql
2d9e008772dab51ee6a171e0159c783bb5c1095aa0f91c81a106e5154e7a0282 defog/postgres/car_dealership.json
c9b89f31478729fc3e85d5765a78e967dabe61570efcfedd0c7dff89b0cbe0c3 defog/postgres/car_dealership.sql
8b57063075d71aa20f1a8a3e90b8b43de28af8ade041bc10d337591785285123 defog/postgres/derm_treatment.json
4ef82c763a045ebcb4b152f19dd8dc810a05021a52816feab97e90c491d79316 defog/postgres/derm_treatment.sql
68a951aee73b96fa948802ea4645dae2d36d260c5f43195a50666c7fdbf5e470 defog/postgres/ewallet.json
0633eb0baa077b9cc585499ccc43f430eae73ba0a77fddb52b585a75f249c249 defog/postgres/ewallet.sql
f94ad972dcf070538ed9f5799f5470bc3ebcff36ba28770248b166d9397655a6 defog/postgres/geography.json
cec75fc505d1d7fe338f1614eb5e0e11beadd12bc6e5bb0b64191d424a25cd85 defog/postgres/geography.sql
9aa9d0e8e8da2224a619eddfcb7d805a13a47792001f543c5a3cfcad17b98ac0 defog/postgres/restaurants.json
6d495507d02384455e89444de4b7f4bba7e87e03f8d241ad139c3e0848cdc416 defog/postgres/restaurants.sql
621a67439aedeaaf008b7a190f1a659dc9286a315c762de333b7b121272e4794 defog/postgres/scholar.json
d9b3ff1c30683862fedad30bf072e3293c62dffb5c7419427a8a54fdbee6a6b4 defog/postgres/scholar.sql
4945099df83a47354c131df95c5babbfa4364124aadd9369f0db692537a39456 defog/postgres/yelp.json
ba2403129a48f099d0bfa0983930211baed1f239f44358fd9b89a485122ef68f defog/postgres/yelp.sql
c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4 defog/questions/LICENSE
14f00f2075f7357645b78da463f1f57745c4ecb3c4f038d5f95ba22914ed0ff9 defog/questions/idk.csv
566f5267119df0eceb32054037280c2fd5bc8c21b27e9ff6b068d11a47011934 defog/questions/instruct_advanced_postgres.csv
7837ab0a513ab81b6376f0cae3f98ed50ffe5eba32eb38382a4564282278d19f defog/questions/instruct_advanced_sqlite.csv
5a4e6112a5c2554c2963939440af6db41dfcaa3697dc131c380e7f9a1b70d5f7 defog/questions/instruct_basic_postgres.csv
7c62dafc8cf46e694a4cabc7cf3512c5e69e17c7df20ec3ce6fee116f94518d4 defog/questions/instruct_basic_sqlite.csv
fee829a042766f3e75d1a453cf6ffd7f6830ae9d68967156caa00c647b5efd0d defog/questions/questions_gen_postgres.csv
58fdaaf6b551542e8a5dc773fdc3a6c9a59f81563a7d3839cb0273704816260d defog/questions/questions_gen_sqlite.csv
a8d1d88a0f9cce3cdbff73b03a80dc5e5d69e3ba2443946c268815a550c9e0ec spider/LICENSE
30d64a3fccde493226df79687aed9e4a1c0129525baf44f29c0573d914d758a4 spider/dev.json
61bb20aa401f03164e2d7f3b16509b7b5f79cc9c943ca7bd159046df1159e2ed spider/tables.json
28a9529c7d0bb4dc51f4bf5c116a3d16ef247a052f7591466768ddf563fd1cf5 spiderman/LICENSE
f0bdce33f39ce70b8c6e5c076566e36005a24b5ccb1b0d8ad0c979fb20d2a09e spiderman/test_queries.csv
"

downloaded=0
skipped=0
built=0
warnings=0

log() { printf '%s\n' "$*"; }
warn() {
    printf 'warning: %s\n' "$*" >&2
    warnings=$((warnings + 1))
}
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# raw REPO COMMIT PATH: the raw-file URL of PATH in REPO at COMMIT.
raw() { printf 'https://raw.githubusercontent.com/%s/%s/%s' "$1" "$2" "$3"; }

# curl_to URL DEST: downloads into DEST.part then renames it, so an interrupted run never
# leaves a truncated file that a later run would skip. Prints the HTTP status; returns
# curl's exit status (22 for an HTTP error, thanks to --fail).
curl_to() {
    local url=$1 dest=$2 status=0 code
    mkdir -p "$(dirname "$dest")"
    code=$(curl --fail --location --silent --show-error --retry 3 --connect-timeout 20 \
        --output "$dest.part" --write-out '%{http_code}' "$url") || status=$?
    if [[ $status -eq 0 ]]; then
        mv "$dest.part" "$dest"
    else
        rm -f "$dest.part"
    fi
    printf '%s' "$code"
    return "$status"
}

# verify REL: compares TARGET/REL with its expected SHA-256, when both are known.
verify() {
    local rel=$1 expected actual
    expected=$(awk -v p="$rel" '$2 == p { print $1 }' <<<"$EXPECTED_SHA256")
    if [[ -z $expected ]] || ! command -v sha256sum >/dev/null; then
        return 0
    fi
    actual=$(sha256sum "$TARGET/$rel" | cut -d' ' -f1)
    if [[ $actual != "$expected" ]]; then
        warn "$rel differs from the copy askdb was developed against (sha256 $actual)"
    fi
}

# fetch URL REL: downloads a required file to TARGET/REL unless it exists; a failure stops
# the script.
fetch() {
    local url=$1 rel=$2
    if [[ -s $TARGET/$rel ]]; then
        log "exists      $rel"
        skipped=$((skipped + 1))
        return 0
    fi
    log "download    $rel  <-  $url"
    curl_to "$url" "$TARGET/$rel" >/dev/null || die "could not download $url"
    downloaded=$((downloaded + 1))
    verify "$rel"
}

# fetch_optional URL DEST: downloads a file that may be missing upstream (HTTP 404): returns
# 1 in that case instead of stopping. Any other failure stops the script.
fetch_optional() {
    local url=$1 dest=$2 code status=0
    code=$(curl_to "$url" "$dest" 2>/dev/null) || status=$?
    if [[ $status -eq 0 ]]; then
        return 0
    elif [[ $code == 404 ]]; then
        return 1
    fi
    die "could not download $url (curl exit $status, HTTP ${code:-none})"
}

command -v curl >/dev/null || die "curl is required"
mkdir -p "$TARGET"
TARGET="$(cd "$TARGET" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log "target: $TARGET"

# --- chinook -------------------------------------------------------------------------------
for file in Chinook_Sqlite.sqlite Chinook_PostgreSql.sql; do
    fetch "$(raw "$CHINOOK_REPO" "$CHINOOK_COMMIT" "ChinookDatabase/DataSources/$file")" "chinook/$file"
done
fetch "$(raw "$CHINOOK_REPO" "$CHINOOK_COMMIT" LICENSE.md)" chinook/LICENSE.md

# --- defog: PostgreSQL dumps and column descriptions (defog-data) ---------------------------
fetch "$(raw "$DEFOG_DATA_REPO" "$DEFOG_DATA_COMMIT" LICENSE)" defog/LICENSE
for db in "${DEFOG_DBS[@]}"; do
    for ext in sql json; do
        fetch "$(raw "$DEFOG_DATA_REPO" "$DEFOG_DATA_COMMIT" "defog_data/$db/$db.$ext")" \
            "defog/postgres/$db.$ext"
    done
done

# --- defog: questions with gold SQL (sql-eval) ----------------------------------------------
fetch "$(raw "$SQL_EVAL_REPO" "$SQL_EVAL_COMMIT" LICENSE)" defog/questions/LICENSE
for file in "${DEFOG_QUESTION_FILES[@]}"; do
    fetch "$(raw "$SQL_EVAL_REPO" "$SQL_EVAL_COMMIT" "data/$file.csv")" "defog/questions/$file.csv"
done

# --- spider: dev questions and schemas -------------------------------------------------------
fetch "$(raw "$SPIDER_REPO" "$SPIDER_COMMIT" LICENSE)" spider/LICENSE
for file in dev.json tables.json; do
    fetch "$(raw "$SPIDER_REPO" "$SPIDER_COMMIT" "evaluation_examples/examples/$file")" "spider/$file"
done

# --- spiderman: test questions ---------------------------------------------------------------
fetch "$(raw "$SPIDERMAN_REPO" "$SPIDERMAN_COMMIT" LICENSE)" spiderman/LICENSE
fetch "$(raw "$SPIDERMAN_REPO" "$SPIDERMAN_COMMIT" dataset_mysql/test_queries.csv)" \
    spiderman/test_queries.csv

# --- sparc: multi-turn dev interactions over Spider's dev databases --------------------------
fetch "$(raw "$SPARC_REPO" "$SPARC_COMMIT" LICENSE)" sparc/LICENSE-editsql
fetch "$(raw "$SPARC_REPO" "$SPARC_COMMIT" data/sparc/dev.json)" sparc/dev.json

# --- defog: SQLite files, built locally ------------------------------------------------------
# defog publishes no SQLite files: they come from the PostgreSQL dumps through defog-data's
# own translation (utils_dialects.conv_ddl_to_dialect + create_sqlite_db, which is what
# translate_ddl_dialect.py runs), so the SQLite gold queries see the same data.
build_defog_sqlite() {
    local db todo=()
    for db in "${DEFOG_DBS[@]}"; do
        if [[ -s $TARGET/defog/sqlite/$db.db ]]; then
            log "exists      defog/sqlite/$db.db"
            skipped=$((skipped + 1))
        else
            todo+=("$db")
        fi
    done
    [[ ${#todo[@]} -gt 0 ]] || return 0
    log "defog/sqlite/*.db are built locally, not downloaded (${#todo[@]} to build)"
    if ! command -v python3 >/dev/null || ! python3 -c 'import sqlglot' 2>/dev/null; then
        warn "skipping defog/sqlite: building it needs python3 with sqlglot (pip install sqlglot)"
        return 0
    fi
    local work="$WORK/defog-data"
    mkdir -p "$work"
    if ! curl_to "$(raw "$DEFOG_DATA_REPO" "$DEFOG_DATA_COMMIT" utils_dialects.py)" \
        "$work/utils_dialects.py" >/dev/null; then
        warn "skipping defog/sqlite: could not download defog-data's utils_dialects.py"
        return 0
    fi
    for db in "${todo[@]}"; do
        mkdir -p "$work/defog_data/$db"
        cp "$TARGET/defog/postgres/$db.sql" "$work/defog_data/$db/$db.sql"
    done
    # utils_dialects imports the clients of every dialect it supports; only SQLite is used
    # here, so the clients that are not installed are replaced by empty modules. Each
    # database is built on its own so that one failure does not lose the others.
    (cd "$work" && python3 - "${todo[@]}" <<'PY'
import importlib
import os
import sys
import traceback
import types

for name in ("google.cloud.bigquery", "mysql.connector.errorcode", "pyodbc"):
    try:
        importlib.import_module(name)
    except ImportError:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            module_name = ".".join(parts[:i])
            module = sys.modules.setdefault(module_name, types.ModuleType(module_name))
            if i > 1:
                setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], module)

import sqlglot
import utils_dialects

print(f"translating with sqlglot {sqlglot.__version__}")
for db in sys.argv[1:]:
    try:
        utils_dialects.conv_ddl_to_dialect(db, "sqlite")
        utils_dialects.create_sqlite_db(db)
    except Exception:
        traceback.print_exc()
        # create_sqlite_db leaves a half-filled file behind when a statement fails.
        partial = os.path.join("sqlite_dbs", f"{db}.db")
        if os.path.exists(partial):
            os.remove(partial)
PY
    ) || warn "defog-data's translation code could not run (see above)"
    mkdir -p "$TARGET/defog/sqlite"
    for db in "${todo[@]}"; do
        if [[ -s $work/sqlite_dbs/$db.db ]]; then
            mv "$work/sqlite_dbs/$db.db" "$TARGET/defog/sqlite/$db.db"
            log "built       defog/sqlite/$db.db"
            built=$((built + 1))
        else
            warn "could not build defog/sqlite/$db.db (see above; the result depends on the sqlglot version)"
        fi
    done
}
build_defog_sqlite

# --- spiderman: SQLite files, built locally --------------------------------------------------
# SpiderMan publishes each database as a MySQL schema (dataset_mysql/databases/<db>/
# schema.sql, tables qualified as `db`.`table`) plus one CSV per table (data/<table>.csv).
# The SQLite file is that schema without the `db`. qualifier, with every CSV row inserted as
# text (column affinity turns numbers back into numbers; the literal text NULL stays text,
# as in the files the project was developed against). A few CSVs are missing upstream
# (wta_1's rankings): their tables stay empty.
build_spiderman_sqlite() {
    local db todo=()
    for db in "${SPIDERMAN_DBS[@]}"; do
        if [[ -s $TARGET/spiderman/sqlite/$db.sqlite ]]; then
            log "exists      spiderman/sqlite/$db.sqlite"
            skipped=$((skipped + 1))
        else
            todo+=("$db")
        fi
    done
    [[ ${#todo[@]} -gt 0 ]] || return 0
    log "spiderman/sqlite/*.sqlite are built locally from SpiderMan's schema and CSV files (${#todo[@]} to build)"
    if ! command -v python3 >/dev/null; then
        warn "skipping spiderman/sqlite: building it needs python3"
        return 0
    fi
    local base="dataset_mysql/databases" src table
    for db in "${todo[@]}"; do
        src="$WORK/spiderman/$db"
        mkdir -p "$src/data"
        curl_to "$(raw "$SPIDERMAN_REPO" "$SPIDERMAN_COMMIT" "$base/$db/schema.sql")" \
            "$src/schema.sql" >/dev/null || die "could not download the schema of $db"
        while IFS= read -r table; do
            if ! fetch_optional "$(raw "$SPIDERMAN_REPO" "$SPIDERMAN_COMMIT" "$base/$db/data/$table.csv")" \
                "$src/data/$table.csv"; then
                log "            $db.$table has no CSV upstream: the table stays empty"
            fi
        done < <(sed -n -E 's/^CREATE TABLE (`[^`]*`\.)?`([^`]+)`.*/\2/p' "$src/schema.sql")
        mkdir -p "$TARGET/spiderman/sqlite"
        if ! python3 - "$db" "$src" "$TARGET/spiderman/sqlite/$db.sqlite" <<'PY'
import csv
import os
import sqlite3
import sys

db, src, out = sys.argv[1:4]
with open(os.path.join(src, "schema.sql"), encoding="utf-8") as f:
    schema = f.read().replace(f"`{db}`.", "")
partial = out + ".part"
if os.path.exists(partial):
    os.remove(partial)
conn = sqlite3.connect(partial)
conn.executescript(schema)
tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
for table in tables:
    path = os.path.join(src, "data", f"{table}.csv")
    if not os.path.exists(path):
        continue
    with open(path, newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if not header:
            continue
        columns = ", ".join(f"`{name}`" for name in header)
        marks = ", ".join("?" for _ in header)
        conn.executemany(f"INSERT INTO `{table}` ({columns}) VALUES ({marks})", rows)
conn.commit()
conn.close()
os.replace(partial, out)
PY
        then
            warn "could not build spiderman/sqlite/$db.sqlite (see above)"
            continue
        fi
        log "built       spiderman/sqlite/$db.sqlite"
        built=$((built + 1))
    done
}
build_spiderman_sqlite

log "done: $downloaded downloaded, $built built, $skipped already present, $warnings warning(s)"
