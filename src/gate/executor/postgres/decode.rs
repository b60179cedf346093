//! Values from PostgreSQL's binary format to JSON, by column type: exact decimals,
//! dates and times as text in the server's own forms, arrays as nested lists, and a
//! placeholder naming the type of anything else.

use super::*;

/// One result cell as JSON, decoded by its column type. Accepts every type, so no
/// column can make a row fail; unknown types become a `"<type name>"` placeholder.
pub(crate) struct PgCell(pub JsonValue);

/// A value's length on the wire, read without decoding it: what the row costs is known
/// before any of it is copied into JSON.
pub(crate) struct WireLength(pub u64);

impl<'a> FromSql<'a> for WireLength {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(WireLength(raw.len() as u64))
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, BoxError> {
        Ok(WireLength(0))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

impl<'a> FromSql<'a> for PgCell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgCell(decode(ty, raw)))
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, BoxError> {
        Ok(PgCell(JsonValue::Null))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// A NUMERIC as exact decimal text ("12.30", "-0.05", "NaN", "Infinity"), with as
/// many fraction digits as the value's display scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgNumeric {
    pub text: String,
    /// Digits after the decimal point.
    pub scale: u16,
}

impl<'a> FromSql<'a> for PgNumeric {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        decode_numeric(raw).ok_or_else(|| "malformed NUMERIC value".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

impl PgNumeric {
    /// A JSON number when converting to f64 and back gives the same decimal text
    /// (integers when the scale is 0), else the exact text as a JSON string.
    pub fn to_json(&self) -> JsonValue {
        let text = self.text.as_str();
        if self.scale == 0 {
            if let Ok(integer) = text.parse::<i64>() {
                return JsonValue::from(integer);
            }
            if let Ok(integer) = text.parse::<u64>() {
                return JsonValue::from(integer);
            }
            return JsonValue::String(self.text.clone());
        }
        if let Ok(float) = text.parse::<f64>() {
            let back = format!("{:.*}", usize::from(self.scale), float);
            if float.is_finite() && back == text {
                if let Some(number) = serde_json::Number::from_f64(float) {
                    return JsonValue::Number(number);
                }
            }
        }
        JsonValue::String(self.text.clone())
    }
}

/// Decodes NUMERIC's binary form: digit count, weight (base-10000 exponent of the
/// first digit), sign, display scale, then base-10000 digits.
pub(super) fn decode_numeric(raw: &[u8]) -> Option<PgNumeric> {
    let word = |index: usize| {
        raw.get(index * 2..index * 2 + 2)
            .map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let digit_count = usize::from(word(0)?);
    let weight = i64::from(word(1)? as i16);
    let sign = word(2)?;
    let scale = word(3)?;
    let special = |text: &str| {
        Some(PgNumeric {
            text: text.to_string(),
            scale: 0,
        })
    };
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        0xC000 => return special("NaN"),
        0xD000 => return special("Infinity"),
        0xF000 => return special("-Infinity"),
        _ => return None,
    };
    let mut digits = Vec::with_capacity(digit_count);
    for index in 0..digit_count {
        let digit = word(4 + index)?;
        if digit > 9999 {
            return None;
        }
        digits.push(digit);
    }
    if raw.len() != 8 + digit_count * 2 {
        return None;
    }
    // Digit i stands for digit * 10000^(weight - i).
    let digit_at = |position: i64| -> u16 {
        let index = weight - position;
        if index < 0 {
            return 0;
        }
        usize::try_from(index)
            .ok()
            .and_then(|index| digits.get(index).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        text.push_str(&digit_at(weight).to_string());
        for power in (0..weight).rev() {
            text.push_str(&format!("{:04}", digit_at(power)));
        }
    }
    if scale > 0 {
        let mut fraction = String::new();
        let mut power = -1;
        while fraction.len() < usize::from(scale) {
            fraction.push_str(&format!("{:04}", digit_at(power)));
            power -= 1;
        }
        fraction.truncate(usize::from(scale));
        text.push('.');
        text.push_str(&fraction);
    }
    Some(PgNumeric { text, scale })
}

pub(super) fn decode(ty: &Type, raw: &[u8]) -> JsonValue {
    decode_known(ty, raw).unwrap_or_else(|| placeholder(ty))
}

pub(super) fn placeholder(ty: &Type) -> JsonValue {
    match ty.kind() {
        Kind::Array(element) => JsonValue::String(format!("<{}[]>", element.name())),
        _ => JsonValue::String(format!("<{}>", ty.name())),
    }
}

pub(super) fn be<const N: usize>(raw: &[u8]) -> Option<[u8; N]> {
    raw.try_into().ok()
}

pub(super) fn text_of(raw: &[u8]) -> JsonValue {
    JsonValue::String(String::from_utf8_lossy(raw).into_owned())
}

pub(super) fn float_json(value: f64) -> JsonValue {
    if value.is_nan() {
        JsonValue::String("NaN".to_string())
    } else if value.is_infinite() {
        JsonValue::String(if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string())
    } else {
        serde_json::Number::from_f64(value)
            .map(JsonValue::Number)
            .unwrap_or(JsonValue::Null)
    }
}

/// The value by type, or None when the type has no decoder (or the bytes are not
/// what the type promises), which becomes a placeholder.
pub(super) fn decode_known(ty: &Type, raw: &[u8]) -> Option<JsonValue> {
    let value = match *ty {
        Type::BOOL => JsonValue::Bool(be::<1>(raw)?[0] != 0),
        Type::INT2 => JsonValue::from(i16::from_be_bytes(be(raw)?)),
        Type::INT4 => JsonValue::from(i32::from_be_bytes(be(raw)?)),
        Type::INT8 => JsonValue::from(i64::from_be_bytes(be(raw)?)),
        Type::OID => JsonValue::from(u32::from_be_bytes(be(raw)?)),
        Type::FLOAT4 => float_json(f64::from(f32::from_be_bytes(be(raw)?))),
        Type::FLOAT8 => float_json(f64::from_be_bytes(be(raw)?)),
        Type::NUMERIC => PgNumeric::from_sql(ty, raw).ok()?.to_json(),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::CHAR => {
            text_of(raw)
        }
        Type::JSON => serde_json::from_slice(raw).unwrap_or_else(|_| text_of(raw)),
        Type::JSONB => {
            // Version byte 1, then the JSON text.
            let (&version, body) = raw.split_first()?;
            if version != 1 {
                return None;
            }
            serde_json::from_slice(body).unwrap_or_else(|_| text_of(body))
        }
        Type::UUID => JsonValue::String(uuid_text(&be::<16>(raw)?)),
        Type::DATE => JsonValue::String(date_text(i32::from_be_bytes(be(raw)?))),
        Type::TIMESTAMP => JsonValue::String(timestamp_text(i64::from_be_bytes(be(raw)?), "")),
        Type::TIMESTAMPTZ => {
            JsonValue::String(timestamp_text(i64::from_be_bytes(be(raw)?), "+00:00"))
        }
        Type::TIME => JsonValue::String(time_text(i64::from_be_bytes(be(raw)?))),
        Type::TIMETZ => {
            let (time, zone) = raw.split_at_checked(8)?;
            let micros = i64::from_be_bytes(be(time)?);
            // Stored as seconds west of UTC; printed the ISO way (east positive).
            let east = -i64::from(i32::from_be_bytes(be(zone)?));
            JsonValue::String(format!("{}{}", time_text(micros), offset_text(east)))
        }
        Type::INTERVAL => {
            let micros = i64::from_be_bytes(be(raw.get(0..8)?)?);
            let days = i32::from_be_bytes(be(raw.get(8..12)?)?);
            let months = i32::from_be_bytes(be(raw.get(12..16)?)?);
            if raw.len() != 16 {
                return None;
            }
            JsonValue::String(interval_text(months, days, micros))
        }
        Type::BYTEA => JsonValue::String(format!("<bytea, {} bytes>", raw.len())),
        _ => match ty.kind() {
            Kind::Domain(inner) => decode_known(inner, raw)?,
            // An enum's binary form is its label.
            Kind::Enum(_) => text_of(raw),
            Kind::Array(element) => decode_array(element, raw)?,
            _ => return None,
        },
    };
    Some(value)
}

/// An array as nested JSON arrays: dimension count, null flag, element type, then
/// (length, lower bound) per dimension, then each element as length + bytes (-1 for
/// NULL).
pub(super) fn decode_array(element: &Type, raw: &[u8]) -> Option<JsonValue> {
    let int = |at: usize| {
        raw.get(at..at + 4)
            .and_then(be::<4>)
            .map(i32::from_be_bytes)
    };
    let dimensions = usize::try_from(int(0)?).ok()?;
    if dimensions == 0 {
        return Some(JsonValue::Array(Vec::new()));
    }
    if dimensions > 6 {
        return None;
    }
    let mut lengths = Vec::with_capacity(dimensions);
    for dimension in 0..dimensions {
        lengths.push(usize::try_from(int(12 + dimension * 8)?).ok()?);
    }
    let mut at = 12 + dimensions * 8;
    let total: usize = lengths
        .iter()
        .try_fold(1usize, |acc, n| acc.checked_mul(*n))?;
    let mut flat = Vec::with_capacity(total.min(10_000));
    for _ in 0..total {
        let length = int(at)?;
        at += 4;
        if length < 0 {
            flat.push(JsonValue::Null);
        } else {
            let length = usize::try_from(length).ok()?;
            let bytes = raw.get(at..at + length)?;
            at += length;
            flat.push(decode(element, bytes));
        }
    }
    // Fold the flat list into nested arrays, innermost dimension first.
    let mut level = flat;
    for length in lengths.iter().skip(1).rev() {
        if *length == 0 {
            break;
        }
        level = level
            .chunks(*length)
            .map(|chunk| JsonValue::Array(chunk.to_vec()))
            .collect();
    }
    Some(JsonValue::Array(level))
}

pub(super) fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Days between 1970-01-01 and 2000-01-01, PostgreSQL's epoch for dates and times.
pub(super) const PG_EPOCH_DAYS: i64 = 10_957;
pub(super) const MICROS_PER_DAY: i64 = 86_400_000_000;

/// 'YYYY-MM-DD' for a day count since 2000-01-01, and whether the year is BC (as
/// PostgreSQL writes it: year 0 is 1 BC).
pub(super) fn civil_text(days_since_2000: i64) -> (String, bool) {
    let (year, month, day) = crate::calendar::civil_from_days(days_since_2000 + PG_EPOCH_DAYS);
    if year <= 0 {
        (format!("{:04}-{month:02}-{day:02}", 1 - year), true)
    } else {
        (format!("{year:04}-{month:02}-{day:02}"), false)
    }
}

pub(super) fn date_text(days: i32) -> String {
    match days {
        i32::MAX => "infinity".to_string(),
        i32::MIN => "-infinity".to_string(),
        _ => {
            let (text, bc) = civil_text(i64::from(days));
            if bc {
                format!("{text} BC")
            } else {
                text
            }
        }
    }
}

/// 'HH:MM:SS', with the microseconds when there are any (trailing zeros dropped).
pub(super) fn clock_text(micros_of_day: i64) -> String {
    let seconds = micros_of_day / 1_000_000;
    let fraction = micros_of_day % 1_000_000;
    let mut text = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

/// 'YYYY-MM-DD HH:MM:SS[.ffffff]' plus `zone`, the form PostgreSQL prints (and the
/// form SQLite stores), for microseconds since 2000-01-01 00:00:00.
pub(super) fn timestamp_text(micros: i64, zone: &str) -> String {
    match micros {
        i64::MAX => "infinity".to_string(),
        i64::MIN => "-infinity".to_string(),
        _ => {
            let days = micros.div_euclid(MICROS_PER_DAY);
            let (date, bc) = civil_text(days);
            let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
            let era = if bc { " BC" } else { "" };
            format!("{date} {clock}{zone}{era}")
        }
    }
}

pub(super) fn time_text(micros: i64) -> String {
    clock_text(micros.rem_euclid(MICROS_PER_DAY + 1))
}

/// '+HH:MM' for an offset in seconds east of UTC.
pub(super) fn offset_text(east_seconds: i64) -> String {
    let sign = if east_seconds < 0 { '-' } else { '+' };
    let seconds = east_seconds.abs();
    let mut text = format!("{sign}{:02}:{:02}", seconds / 3600, seconds / 60 % 60);
    if seconds % 60 != 0 {
        text.push_str(&format!(":{:02}", seconds % 60));
    }
    text
}

/// An interval as an ISO 8601 duration, the way PostgreSQL's `iso_8601` interval
/// style writes it: each part carries its own sign ("P1Y2M3DT4H5M6.5S", "P-1D",
/// "PT0S" for zero).
pub(super) fn interval_text(months: i32, days: i32, micros: i64) -> String {
    let mut text = String::from("P");
    let years = months / 12;
    let months = months % 12;
    if years != 0 {
        text.push_str(&format!("{years}Y"));
    }
    if months != 0 {
        text.push_str(&format!("{months}M"));
    }
    if days != 0 {
        text.push_str(&format!("{days}D"));
    }
    if micros != 0 {
        text.push('T');
        let hours = micros / 3_600_000_000;
        let minutes = micros / 60_000_000 % 60;
        let second_micros = micros % 60_000_000;
        if hours != 0 {
            text.push_str(&format!("{hours}H"));
        }
        if minutes != 0 {
            text.push_str(&format!("{minutes}M"));
        }
        if second_micros != 0 {
            let sign = if second_micros < 0 { "-" } else { "" };
            let magnitude = second_micros.unsigned_abs();
            let whole = magnitude / 1_000_000;
            let fraction = magnitude % 1_000_000;
            text.push_str(&format!("{sign}{whole}"));
            if fraction != 0 {
                let digits = format!("{fraction:06}");
                text.push('.');
                text.push_str(digits.trim_end_matches('0'));
            }
            text.push('S');
        }
    }
    if text == "P" {
        text.push_str("T0S");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(words: &[u16]) -> Vec<u8> {
        words.iter().flat_map(|word| word.to_be_bytes()).collect()
    }

    #[test]
    fn numeric_binary_decodes_to_exact_decimal_text() {
        // 12.30: one integer digit 12, one fraction digit 3000, scale 2.
        let value = decode_numeric(&numeric(&[2, 0, 0, 2, 12, 3000])).expect("decodes");
        assert_eq!(value.text, "12.30");
        assert_eq!(value.to_json(), serde_json::json!(12.3));
        // -0.05: weight -1, digit 500, scale 2, negative.
        let value = decode_numeric(&numeric(&[1, (-1i16) as u16, 0x4000, 2, 500])).expect("ok");
        assert_eq!(value.text, "-0.05");
        // 0 with scale 2.
        let value = decode_numeric(&numeric(&[0, 0, 0, 2])).expect("zero");
        assert_eq!(value.text, "0.00");
        // 10000000 (weight 1, digits [1000, 0] trimmed to [1000]).
        let value = decode_numeric(&numeric(&[1, 1, 0, 0, 1000])).expect("ok");
        assert_eq!(value.text, "10000000");
        assert_eq!(value.to_json(), serde_json::json!(10_000_000));
        // 0.00001234: weight -2 (first digit is 10000^-2), digits 1234, scale 8.
        let value = decode_numeric(&numeric(&[1, (-2i16) as u16, 0, 8, 1234])).expect("ok");
        assert_eq!(value.text, "0.00001234");
        // Too many digits for f64: stays exact text.
        let value =
            decode_numeric(&numeric(&[6, 4, 0, 8, 1, 2345, 6789, 123, 4567, 8901])).expect("ok");
        assert_eq!(value.text, "12345678901234567.89010000");
        assert_eq!(value.to_json(), serde_json::json!(value.text));
        assert_eq!(
            decode_numeric(&numeric(&[0, 0, 0xC000, 0])).map(|n| n.text),
            Some("NaN".to_string())
        );
        assert_eq!(
            decode_numeric(&numeric(&[0, 0, 0xF000, 0])).map(|n| n.text),
            Some("-Infinity".to_string())
        );
        // The FromSql impl is the path result cells take.
        let bytes = numeric(&[2, 0, 0, 2, 12, 3000]);
        assert!(<PgNumeric as FromSql>::accepts(&Type::NUMERIC));
        assert!(!<PgNumeric as FromSql>::accepts(&Type::FLOAT8));
        let value = <PgNumeric as FromSql>::from_sql(&Type::NUMERIC, &bytes).expect("decodes");
        assert_eq!(value.text, "12.30");
        assert_eq!(decode(&Type::NUMERIC, &bytes), serde_json::json!(12.3));
        // Malformed input never panics.
        assert!(decode_numeric(&[0, 1]).is_none());
        assert!(decode_numeric(&numeric(&[2, 0, 0, 0, 1])).is_none());
        assert!(decode_numeric(&numeric(&[1, 0, 0, 0, 10000])).is_none());
    }

    #[test]
    fn dates_times_and_intervals_print_as_iso_text() {
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(9132), "2025-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(i32::MAX), "infinity");
        assert_eq!(date_text(-730_485), "0001-01-01 BC");
        assert_eq!(date_text(-730_119), "0001-01-01");
        let micros = 9132 * MICROS_PER_DAY + (10 * 3600 + 5 * 60 + 9) * 1_000_000;
        assert_eq!(timestamp_text(micros, ""), "2025-01-01 10:05:09");
        assert_eq!(
            timestamp_text(micros + 500_000, "+00:00"),
            "2025-01-01 10:05:09.5+00:00"
        );
        assert_eq!(timestamp_text(-1, ""), "1999-12-31 23:59:59.999999");
        assert_eq!(time_text(3_600_000_000 + 1), "01:00:00.000001");
        assert_eq!(offset_text(19_800), "+05:30");
        assert_eq!(offset_text(-3600), "-01:00");
        assert_eq!(interval_text(0, 0, 0), "PT0S");
        assert_eq!(
            interval_text(14, 3, (4 * 3600 + 5 * 60 + 6) * 1_000_000 + 500_000),
            "P1Y2M3DT4H5M6.5S"
        );
        assert_eq!(interval_text(0, -1, 0), "P-1D");
        assert_eq!(interval_text(0, 0, -90 * 1_000_000), "PT-1M-30S");
    }

    #[test]
    fn unknown_types_become_placeholders_and_never_panic() {
        assert_eq!(
            decode(&Type::INET, &[2, 32, 0, 4, 127, 0, 0, 1]),
            JsonValue::String("<inet>".into())
        );
        assert_eq!(
            decode(&Type::INT4, &[1, 2]),
            JsonValue::String("<int4>".into())
        );
        assert_eq!(
            decode(&Type::INT4_ARRAY, &[0, 0]),
            JsonValue::String("<int4[]>".into())
        );
        assert_eq!(
            decode(&Type::UUID, &[0xab; 16]),
            JsonValue::String("abababab-abab-abab-abab-abababababab".into())
        );
    }
}
