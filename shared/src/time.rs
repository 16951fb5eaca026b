//! Timestamps (`YYYY-MM-DDThh:mm:ss.mmm`, UTC unless a zone is asked for), date filters and zones.

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::error::ApiError;

/// No request lives longer than this (seconds): API Gateway ends them at 29 s, `waymark serve`
/// at its request timeout. Work marked by a request older than this was abandoned.
pub const REQUEST_LIFETIME_SECONDS: i64 = 60;

/// The interface's timestamp format: ISO 8601, milliseconds, no zone designator.
pub const TS_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3f";

/// Format a UTC instant in the interface's form, shifted into `tz` when one was requested.
pub fn format_ts(t: DateTime<Utc>, tz: Option<Tz>) -> String {
    match tz {
        Some(tz) => t.with_timezone(&tz).format(TS_FORMAT).to_string(),
        None => {
            let mut buf = [0u8; 23];
            match write_utc(t, &mut buf) {
                Some(s) => s.to_owned(),
                None => t.format(TS_FORMAT).to_string(),
            }
        }
    }
}

/// `t` in [`TS_FORMAT`] written into `buf` without chrono's format interpreter (a summary
/// writes hundreds of thousands of them); `None` outside years 0..=9999 or in a leap second,
/// which [`format_ts`] leaves to chrono.
pub fn write_utc(t: DateTime<Utc>, buf: &mut [u8; 23]) -> Option<&str> {
    use chrono::{Datelike, Timelike};
    let (year, nanos) = (t.year(), t.nanosecond());
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        return None;
    }
    let mut put = |at: usize, width: usize, mut v: u32| {
        for k in (at..at + width).rev() {
            buf[k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year as u32);
    put(5, 2, t.month());
    put(8, 2, t.day());
    put(11, 2, t.hour());
    put(14, 2, t.minute());
    put(17, 2, t.second());
    put(20, 3, nanos / 1_000_000);
    for (k, c) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.')] {
        buf[k] = c;
    }
    std::str::from_utf8(buf).ok()
}

/// The stored form `YYYY-MM-DDThh:mm:ss.mmm` read directly (every stored fix carries several);
/// `None` for anything else, which [`parse_ts`] hands to chrono's general parsers.
fn parse_canonical(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    if b.len() != 23
        || [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.')].iter().any(|&(k, c)| b[k] != c)
    {
        return None;
    }
    let num = |at: usize, width: usize| -> Option<u32> {
        b[at..at + width].iter().try_fold(0u32, |n, &d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 2)?, num(8, 2)?)?;
    // A leap second (ss = 60) goes the general way.
    let (h, m, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if sec > 59 {
        return None;
    }
    Some(date.and_hms_milli_opt(h, m, sec, num(20, 3)?)?.and_utc())
}

/// Current time truncated to milliseconds, the precision we store and return.
pub fn now() -> DateTime<Utc> {
    truncate_ms(Utc::now())
}

pub fn truncate_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

/// Parse a timestamp from input: RFC 3339 with a zone (`...Z`, `...+05:30`) or the interface's
/// zone-less form, which is read as UTC. Years 1970..=9999 only.
pub fn parse_ts(field: &str, s: &str) -> Result<DateTime<Utc>, ApiError> {
    let s = s.trim();
    let parsed = parse_canonical(s)
        .or_else(|| DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).ok())
        .or_else(|| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
                .map(|n| n.and_utc())
        })
        .ok_or_else(|| ApiError::field(field, format!("'{s}' is not a timestamp (YYYY-MM-DDThh:mm:ss.mmm, UTC)")))?;
    if parsed.timestamp() < 0 {
        return Err(ApiError::field(field, "must be after 1970-01-01"));
    }
    Ok(truncate_ms(parsed))
}

/// `timezone_offset` is an IANA zone name such as `Asia/Kolkata`.
pub fn parse_tz(s: Option<&str>) -> Result<Option<Tz>, ApiError> {
    s.map(|name| {
        name.parse::<Tz>().map_err(|_| {
            ApiError::field("timezone_offset", format!("'{name}' is not a time zone name (e.g. Europe/Berlin)"))
        })
    })
    .transpose()
}

/// A location record's `timezone_offset`: a fixed offset (`+hh:mm` or `+hhmm`, up to ±14:00) or
/// an IANA zone name (`Europe/Berlin`), whose offset follows daylight saving time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Fixed(FixedOffset),
    Named(Tz),
}

impl Zone {
    /// `None` for anything else (a record carrying it is refused at ingest).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (sign, rest) = match s.as_bytes().first() {
            Some(b'+') => (1, &s[1..]),
            Some(b'-') => (-1, &s[1..]),
            _ => return s.parse::<Tz>().ok().map(Zone::Named),
        };
        let digits = match rest.as_bytes() {
            [_, _, b':', _, _] => format!("{}{}", &rest[..2], &rest[3..]),
            [_, _, _, _] => rest.to_owned(),
            _ => return None,
        };
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (h, m): (i32, i32) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
        if h > 14 || m > 59 || h * 60 + m > 14 * 60 {
            return None;
        }
        FixedOffset::east_opt(sign * (h * 3600 + m * 60)).map(Zone::Fixed)
    }

    /// Seconds east of UTC at the instant `t`.
    pub fn offset_s(&self, t: DateTime<Utc>) -> i32 {
        match self {
            Zone::Fixed(o) => o.local_minus_utc(),
            Zone::Named(tz) => tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc(),
        }
    }

    /// The local wall-clock time of the instant `t`.
    pub fn local(&self, t: DateTime<Utc>) -> NaiveDateTime {
        t.naive_utc() + Duration::seconds(self.offset_s(t).into())
    }

    /// The offset at `t` in the interface's `+hhmm` form.
    pub fn hhmm(&self, t: DateTime<Utc>) -> String {
        hhmm(self.offset_s(t))
    }
}

/// Seconds east of UTC as `+hhmm`.
pub fn hhmm(offset_s: i32) -> String {
    let o = offset_s;
    format!("{}{:02}{:02}", if o < 0 { '-' } else { '+' }, o.abs() / 3600, (o.abs() % 3600) / 60)
}

/// A half-open interval of instants `[start, end)` chosen by `start_date` / `end_date`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl DateRange {
    /// Rules of openapi.yaml (Conventions, Dates): `end_date` needs `start_date` and must be
    /// after it; `start_date` alone is that one day. `end_date` is inclusive: the range runs to the
    /// end of that day. Days are taken in `tz` when given, else UTC. Either may also be a date-time, as Roam takes
    /// (`2024-03-01T08:30:00`, zone-less in `tz` or UTC, or with its own offset): the range then
    /// starts, or ends (inclusive, to the millisecond), at that instant; a date-time
    /// `start_date` alone runs to the end of its day.
    pub fn parse(start: Option<&str>, end: Option<&str>, tz: Option<Tz>) -> Result<Option<Self>, ApiError> {
        let start = start.map(|s| Bound::parse("start_date", s, tz)).transpose()?;
        let end = end.map(|s| Bound::parse("end_date", s, tz)).transpose()?;
        let day_after = |d: NaiveDate| {
            d.succ_opt().map(|n| local_midnight(n, tz)).ok_or_else(|| ApiError::field("end_date", "is out of range"))
        };
        let (from, until) = match (start, end) {
            (None, None) => return Ok(None),
            (None, Some(_)) => return Err(ApiError::field("end_date", "requires start_date")),
            (Some(Bound::Day(s)), None) => (local_midnight(s, tz), day_after(s)?),
            (Some(Bound::At(t)), None) => (t, day_after(local_date(t, tz))?),
            (Some(Bound::Day(s)), Some(Bound::Day(e))) if e <= s => {
                return Err(ApiError::field("end_date", "must be after start_date"));
            }
            (Some(s), Some(e)) => {
                let from = match s {
                    Bound::Day(d) => local_midnight(d, tz),
                    Bound::At(t) => t,
                };
                let until = match e {
                    Bound::Day(d) => day_after(d)?,
                    Bound::At(t) => t + Duration::milliseconds(1),
                };
                if until <= from {
                    return Err(ApiError::field("end_date", "must be after start_date"));
                }
                (from, until)
            }
        };
        Ok(Some(Self { start: from, end: until }))
    }

    /// `[since, until)` from two timestamps given in the named fields.
    pub fn parse_fields(since: (&str, &str), until: (&str, &str)) -> Result<Self, ApiError> {
        let start = parse_ts(since.0, since.1)?;
        let end = parse_ts(until.0, until.1)?;
        if end <= start {
            return Err(ApiError::field(until.0, format!("must be after {}", since.0)));
        }
        Ok(Self { start, end })
    }

    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && t < self.end
    }
}

/// A `start_date` / `end_date`: a day, or an instant.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Day(NaiveDate),
    At(DateTime<Utc>),
}

impl Bound {
    fn parse(field: &str, s: &str, tz: Option<Tz>) -> Result<Self, ApiError> {
        let t = s.trim();
        if t.len() <= 10 {
            return parse_date(field, t).map(Bound::Day);
        }
        let at = match (DateTime::parse_from_rfc3339(t), tz) {
            (Ok(z), _) => z.with_timezone(&Utc),
            (Err(_), Some(tz)) => {
                let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
                    .iter()
                    .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
                    .ok_or_else(|| not_a_date(field, s))?;
                tz.from_local_datetime(&naive).earliest().ok_or_else(|| not_a_date(field, s))?.with_timezone(&Utc)
            }
            (Err(_), None) => parse_ts(field, t).map_err(|_| not_a_date(field, s))?,
        };
        if at.timestamp() < 0 {
            return Err(not_a_date(field, s));
        }
        Ok(Bound::At(truncate_ms(at)))
    }
}

fn not_a_date(field: &str, s: &str) -> ApiError {
    ApiError::field(field, format!("'{s}' is not a date YYYY-MM-DD or a date-time YYYY-MM-DDThh:mm:ss from 1970 on"))
}

/// The local date of an instant in `tz` (UTC when None).
fn local_date(t: DateTime<Utc>, tz: Option<Tz>) -> NaiveDate {
    match tz {
        Some(tz) => t.with_timezone(&tz).date_naive(),
        None => t.date_naive(),
    }
}

fn parse_date(field: &str, s: &str) -> Result<NaiveDate, ApiError> {
    NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .ok()
        .filter(|d| d.and_hms_opt(0, 0, 0).is_some_and(|n| n.and_utc().timestamp() >= 0))
        .ok_or_else(|| ApiError::field(field, format!("'{s}' is not a date YYYY-MM-DD from 1970 on")))
}

/// The instant a local day begins. Where a zone skips midnight (DST), the day begins at the first
/// instant that exists.
fn local_midnight(d: NaiveDate, tz: Option<Tz>) -> DateTime<Utc> {
    let midnight = d.and_hms_opt(0, 0, 0).unwrap_or_default();
    match tz {
        None => midnight.and_utc(),
        Some(tz) => (0..4)
            .find_map(|h| tz.from_local_datetime(&(midnight + Duration::hours(h))).earliest())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|| midnight.and_utc()),
    }
}

/// A stored instant, written in the interface's form (UTC) and read from any accepted form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn now() -> Self {
        Self(now())
    }
    pub fn format(self, tz: Option<Tz>) -> String {
        format_ts(self.0, tz)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 23];
        match write_utc(self.0, &mut buf) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_str(&format_ts(self.0, None)),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor rather than a String: no allocation per timestamp read.
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a timestamp")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
                parse_ts("timestamp", s)
                    .map(Timestamp)
                    .map_err(|e| E::custom(e.msg.trim_start_matches("timestamp: ").to_owned()))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_alone_is_that_day_in_the_zone() {
        let tz = parse_tz(Some("Asia/Kolkata")).unwrap();
        let r = DateRange::parse(Some("2024-03-01"), None, tz).unwrap().unwrap();
        assert_eq!(format_ts(r.start, None), "2024-02-29T18:30:00.000");
        assert_eq!(format_ts(r.end, None), "2024-03-01T18:30:00.000");
    }

    #[test]
    fn end_date_is_inclusive_and_must_follow_start() {
        let r = DateRange::parse(Some("2024-03-01"), Some("2024-03-03"), None).unwrap().unwrap();
        assert_eq!(format_ts(r.end, None), "2024-03-04T00:00:00.000");
        assert!(DateRange::parse(Some("2024-03-01"), Some("2024-03-01"), None).is_err());
        assert!(DateRange::parse(None, Some("2024-03-01"), None).is_err());
        assert!(DateRange::parse(Some("2024-13-01"), None, None).is_err());
    }

    #[test]
    fn the_fast_format_writes_what_chrono_writes() {
        let tz = parse_tz(Some("Asia/Kolkata")).unwrap();
        let at = |y, mo, d, h, mi, s, ms| {
            NaiveDate::from_ymd_opt(y, mo, d).unwrap().and_hms_milli_opt(h, mi, s, ms).unwrap().and_utc()
        };
        for t in [
            at(2024, 1, 2, 3, 4, 5, 678),
            at(999, 12, 31, 23, 59, 59, 999),
            at(2024, 2, 29, 0, 0, 0, 1),
            at(12000, 1, 1, 0, 0, 0, 0),
        ] {
            assert_eq!(format_ts(t, None), t.format(TS_FORMAT).to_string());
            assert_eq!(format_ts(t, tz), t.with_timezone(&tz.unwrap()).format(TS_FORMAT).to_string());
        }
    }

    #[test]
    fn timestamps_parse_with_or_without_zone() {
        let a = parse_ts("t", "2024-01-02T03:04:05.678").unwrap();
        let b = parse_ts("t", "2024-01-02T04:04:05.678+01:00").unwrap();
        assert_eq!(a, b);
        assert_eq!(format_ts(a, None), "2024-01-02T03:04:05.678");
        assert!(parse_ts("t", "yesterday").is_err());
        assert!(parse_tz(Some("Mars/Olympus")).is_err());
    }

    #[test]
    fn the_direct_reader_and_writer_agree_with_chrono() {
        let general = |s: &str| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|n| n.and_utc());
        for s in
            ["2024-01-02T03:04:05.678", "1970-01-01T00:00:00.000", "2024-02-29T23:59:59.999", "9999-12-31T23:59:59.001"]
        {
            let t = parse_canonical(s).unwrap();
            assert_eq!(Some(t), general(s));
            assert_eq!(format_ts(t, None), t.format(TS_FORMAT).to_string());
            assert_eq!(serde_json::to_string(&Timestamp(t)).unwrap(), format!("\"{s}\""));
        }
        for s in
            ["2023-02-29T00:00:00.000", "2024-01-02T24:00:00.000", "2024-01-02 03:04:05.678", "2024-01-02T03:04:05.67"]
        {
            assert!(parse_canonical(s).is_none(), "{s}");
        }
        // Sub-millisecond digits are cut, as chrono's %.3f cuts them.
        let t = DateTime::from_timestamp(1_700_000_000, 123_999_999).unwrap();
        assert_eq!(format_ts(t, None), t.format(TS_FORMAT).to_string());
        let back: Timestamp = serde_json::from_str("\"2024-01-02T03:04:05.678+01:00\"").unwrap();
        assert_eq!(back.0, parse_ts("t", "2024-01-02T02:04:05.678").unwrap());
    }

    #[test]
    fn zones_are_offsets_or_iana_names_with_dst() {
        let winter = parse_ts("t", "2024-01-15T12:00:00").unwrap();
        let summer = parse_ts("t", "2024-07-15T12:00:00").unwrap();
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        assert_eq!((berlin.hhmm(winter), berlin.hhmm(summer)), ("+0100".into(), "+0200".into()));
        for (s, h) in [("+05:30", "+0530"), ("+0530", "+0530"), ("-03:00", "-0300"), ("+14:00", "+1400")] {
            assert_eq!(Zone::parse(s).unwrap().hhmm(summer), h, "{s}");
        }
        for bad in ["Mars/Olympus", "+5", "+05:3", "+15:00", "+05:60", "0530", "", "+05:30x", "UTC+1"] {
            assert!(Zone::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(Zone::parse("Europe/Berlin").unwrap().local(summer).to_string(), "2024-07-15 14:00:00");
    }
}
