//! When a usage limit resets, read from the limit message.
//!
//! The structured `resetsAt` of Claude's `rate_limit_event` is preferred by
//! the caller; this reads what the CLIs print:
//!
//! - `Claude AI usage limit reached|1749924000` (epoch seconds, older Claude);
//! - `resets 5pm (Europe/Vilnius)`, `resets 11:29am (UTC)`,
//!   `resets Dec 4, 8:03pm (Europe/Vilnius)`, `will reset at 3pm (America/Bogota)`;
//! - Codex `try again at 3:39 AM` and `try again at Mar 10th, 2026 3:39 AM`;
//! - a raw OpenAI-style error body (opencode's `responseBody`):
//!   `"resets_at": 1796240000` or `"resets_in_seconds": 3600`.
//!
//! [`retry_in`] reads a rate limit's `Please retry in 20s` (Gemini, OpenAI),
//! and [`next_pacific_midnight`] is when a Gemini daily quota resets.
//!
//! A time with no zone is in the agent machine's zone ([`Zone`]). A time
//! without a full date is the next such time after `now`, allowing an hour
//! of lateness (a day when the month and day are given): the message was
//! printed before `now`, and a reset a few minutes ago is far likelier than
//! one 23 hours (or a year) away.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use regex::Regex;

use super::patterns::Zone;

/// Epoch seconds, or milliseconds when the number is too large for seconds
/// (sources disagree on the unit of `resetsAt`).
pub(crate) fn from_epoch(value: f64) -> Option<DateTime<Utc>> {
    let seconds = if value > 1e12 { value / 1000.0 } else { value };
    if !(1.0..1e11).contains(&seconds) {
        return None;
    }
    DateTime::from_timestamp(seconds as i64, 0)
}

static EPOCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)limit reached\|(\d{9,13})\b").expect("epoch regex"));

static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?xi)
        \b(?:resets?(?:\s+at)?|try\s+again\s+at)\s+
        (?:
            (?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+
            (?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+
            (?:(?P<year>\d{4}),?\s+)?
            (?:at\s+)?
        )?
        (?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\b\.?)?
        (?:\s*\((?P<zone>[A-Za-z0-9_+\-/]+)\))?",
    )
    .expect("reset time regex")
});

static BODY_EPOCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""resets_at"\s*:\s*(\d{9,13})\b"#).expect("body epoch regex"));

static BODY_SECONDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""resets_in_seconds"\s*:\s*(\d{1,9})\b"#).expect("body seconds regex")
});

static RETRY_IN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:retry|try again)\s+(?:in|after)\s+(\d{1,6}(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)\b")
        .expect("retry-in regex")
});

/// The reset time written in `text`, if any.
pub(crate) fn from_text(text: &str, local: Zone, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Some(epoch) = EPOCH.captures(text).and_then(|c| c[1].parse::<f64>().ok()) {
        return from_epoch(epoch);
    }
    if let Some(epoch) = BODY_EPOCH.captures(text).and_then(|c| c[1].parse::<f64>().ok()) {
        return from_epoch(epoch);
    }
    if let Some(seconds) = BODY_SECONDS.captures(text).and_then(|c| c[1].parse::<i64>().ok()) {
        return Some(now + Duration::seconds(seconds));
    }
    TIME.captures_iter(text).find_map(|caps| {
        let hour: u32 = caps["hour"].parse().ok()?;
        let minute: u32 = caps.name("minute").map_or(Some(0), |m| m.as_str().parse().ok())?;
        let hour = match caps.name("ampm") {
            Some(ampm) if (1..=12).contains(&hour) => {
                hour % 12 + if ampm.as_str().to_ascii_lowercase().starts_with('p') { 12 } else { 0 }
            }
            Some(_) => return None,
            // A bare number ("resets 5") is not a time; "17:00" is.
            None if caps.name("minute").is_none() => return None,
            None => hour,
        };
        let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
        let zone = caps
            .name("zone")
            .and_then(|z| z.as_str().parse::<Tz>().ok())
            .map_or(local, Zone::Named);
        let today = local_date(zone, now);
        match caps.name("month") {
            None => next_time(zone, today, time, now),
            Some(month) => {
                let month = month_number(month.as_str())?;
                let day: u32 = caps["day"].parse().ok()?;
                match caps.name("year") {
                    Some(year) => {
                        let date =
                            NaiveDate::from_ymd_opt(year.as_str().parse().ok()?, month, day)?;
                        to_utc(zone, date.and_time(time))
                    }
                    None => next_date(zone, today.year(), month, day, time, now),
                }
            }
        }
    })
}

/// When a rate limit says to come back: `Please retry in 20s.`,
/// `Please try again in 1.5s`, `retry after 2 minutes` (rounded up to a second).
pub(crate) fn retry_in(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let caps = RETRY_IN.captures(text)?;
    let amount: f64 = caps[1].parse().ok()?;
    let unit = caps[2].to_ascii_lowercase();
    let seconds = match unit.as_str() {
        "ms" => amount / 1000.0,
        u if u.starts_with('m') => amount * 60.0,
        _ => amount,
    };
    Some(now + Duration::seconds(seconds.ceil().max(1.0) as i64))
}

/// The next midnight in California, when Google resets daily quotas.
pub(crate) fn next_pacific_midnight(now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let zone = Zone::Named(Tz::America__Los_Angeles);
    let tomorrow = local_date(zone, now).succ_opt()?;
    to_utc(zone, tomorrow.and_time(NaiveTime::MIN))
}

fn next_time(
    zone: Zone,
    today: NaiveDate,
    time: NaiveTime,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let earliest = now - Duration::hours(1);
    (-1..=1)
        .filter_map(|days| to_utc(zone, (today + Duration::days(days)).and_time(time)))
        .find(|at| *at > earliest)
}

fn next_date(
    zone: Zone,
    year: i32,
    month: u32,
    day: u32,
    time: NaiveTime,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let earliest = now - Duration::days(1);
    (year - 1..=year + 1)
        .filter_map(|y| NaiveDate::from_ymd_opt(y, month, day))
        .filter_map(|date| to_utc(zone, date.and_time(time)))
        .find(|at| *at > earliest)
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] =
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let prefix = name.get(..3)?.to_ascii_lowercase();
    MONTHS.iter().position(|m| *m == prefix).map(|i| i as u32 + 1)
}

fn local_date(zone: Zone, now: DateTime<Utc>) -> NaiveDate {
    match zone {
        Zone::Named(tz) => now.with_timezone(&tz).date_naive(),
        Zone::Fixed(offset) => now.with_timezone(&offset).date_naive(),
    }
}

/// A wall-clock time in `zone` as UTC. In a DST gap the clock skips the
/// time, so the next hour is taken; in an overlap, the earlier instant.
fn to_utc(zone: Zone, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    let convert = |local: NaiveDateTime| match zone {
        Zone::Named(tz) => tz.from_local_datetime(&local).earliest().map(|t| t.with_timezone(&Utc)),
        Zone::Fixed(offset) => {
            offset.from_local_datetime(&local).earliest().map(|t| t.with_timezone(&Utc))
        }
    };
    convert(local).or_else(|| convert(local.checked_add_signed(Duration::hours(1))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn reset_times() {
        let utc = Zone::default();
        let vilnius = Zone::Named(Tz::Europe__Vilnius);
        let plus2 = Zone::Fixed(FixedOffset::east_opt(2 * 3600).unwrap());
        let now = at("2026-03-10T09:00:00Z");
        let cases: &[(&str, Zone, Option<&str>)] = &[
            ("Claude AI usage limit reached|1749924000", utc, Some("2025-06-14T18:00:00Z")),
            ("Claude AI usage limit reached|1749924000000", utc, Some("2025-06-14T18:00:00Z")),
            (
                "You've hit your session limit · resets 11:29am (UTC)",
                vilnius,
                Some("2026-03-10T11:29:00Z"),
            ),
            // 5pm Vilnius is 15:00 UTC in March (EET, UTC+2).
            (
                "You've hit your limit · resets 5pm (Europe/Vilnius)",
                utc,
                Some("2026-03-10T15:00:00Z"),
            ),
            // 8am UTC already passed at 9:00 by more than the hour of grace: tomorrow.
            ("You've hit your limit · resets 8am (UTC)", utc, Some("2026-03-11T08:00:00Z")),
            // …but 8:30am is within the hour: the reset just happened.
            ("You've hit your limit · resets 8:30am (UTC)", utc, Some("2026-03-10T08:30:00Z")),
            // No zone: the agent machine's zone.
            ("You've hit your limit · resets 5pm", plus2, Some("2026-03-10T15:00:00Z")),
            (
                "You've hit your weekly limit · resets Dec 4, 8:03pm (Europe/Vilnius)",
                utc,
                Some("2026-12-04T18:03:00Z"),
            ),
            (
                "You've hit your weekly limit · resets Mar 9, 10pm (UTC)",
                utc,
                Some("2026-03-09T22:00:00Z"),
            ),
            (
                "You’ve hit your weekly limit · resets Mar 12, 4am",
                utc,
                Some("2026-03-12T04:00:00Z"),
            ),
            (
                "Claude usage limit reached. Your limit will reset at 3pm (America/Bogota).",
                utc,
                Some("2026-03-10T20:00:00Z"),
            ),
            (
                "You're out of extra usage · resets 2:30pm (Asia/Tokyo)",
                utc,
                Some("2026-03-11T05:30:00Z"),
            ),
            (
                "You've hit your usage limit. Try again at 3:39 PM.",
                plus2,
                Some("2026-03-10T13:39:00Z"),
            ),
            (
                "You've hit your usage limit. Try again at Mar 10th, 2026 3:39 AM.",
                plus2,
                Some("2026-03-10T01:39:00Z"),
            ),
            (
                "You've hit your usage limit. Try again at Apr 1st, 2027 12:05 AM.",
                utc,
                Some("2027-04-01T00:05:00Z"),
            ),
            ("resets 17:45 (UTC)", utc, Some("2026-03-10T17:45:00Z")),
            (
                "Unknown zone falls back to local: resets 6pm (Mars/Olympus)",
                plus2,
                Some("2026-03-10T16:00:00Z"),
            ),
            ("You've hit your usage limit. Try again later.", utc, None),
            ("resets 5", utc, None),
            ("resets 13pm (UTC)", utc, None),
            ("no time here", utc, None),
        ];
        for (text, zone, expected) in cases {
            assert_eq!(from_text(text, *zone, now), expected.map(at), "{text}");
        }
    }

    #[test]
    fn dates_near_new_year_take_the_next_year() {
        let now = at("2026-12-30T12:00:00Z");
        let reset = from_text("resets Jan 2, 9am (UTC)", Zone::default(), now);
        assert_eq!(reset, Some(at("2027-01-02T09:00:00Z")));
    }

    #[test]
    fn body_fields_retry_times_and_pacific_midnight() {
        let now = at("2026-12-02T09:00:00Z");
        let body =
            r#"{"error":{"type":"usage_limit_reached","plan_type":"plus","resets_at":1796240000}}"#;
        assert_eq!(from_text(body, Zone::default(), now), from_epoch(1796240000.0));
        let body = r#"{"error":{"type":"usage_limit_reached","resets_in_seconds": 3600}}"#;
        assert_eq!(from_text(body, Zone::default(), now), Some(at("2026-12-02T10:00:00Z")));
        let gemini = "[API Error: You exceeded your current quota, … Please retry in 20s.\nSuggested retry after 20s.]";
        assert_eq!(retry_in(gemini, now), Some(at("2026-12-02T09:00:20Z")));
        assert_eq!(retry_in("Please try again in 1.5s.", now), Some(at("2026-12-02T09:00:02Z")));
        assert_eq!(retry_in("retry after 2 minutes", now), Some(at("2026-12-02T09:02:00Z")));
        assert_eq!(retry_in("Rate limit reached. Try again later.", now), None);
        // 09:00 UTC is 01:00 in Los Angeles (PST, UTC-8): the next midnight is 08:00 UTC tomorrow.
        assert_eq!(next_pacific_midnight(now), Some(at("2026-12-03T08:00:00Z")));
        // In summer (PDT, UTC-7).
        assert_eq!(
            next_pacific_midnight(at("2026-07-01T06:59:00Z")),
            Some(at("2026-07-01T07:00:00Z"))
        );
    }

    #[test]
    fn epochs() {
        assert_eq!(from_epoch(1_796_210_994.0), Some(at("2026-12-02T11:29:54Z")));
        assert_eq!(from_epoch(1_796_210_994_000.0), Some(at("2026-12-02T11:29:54Z")));
        assert_eq!(from_epoch(0.0), None);
        assert_eq!(from_epoch(-5.0), None);
        assert_eq!(from_epoch(f64::NAN), None);
    }

    #[test]
    fn dst_gap_moves_forward() {
        // 3:30am on 2026-03-29 does not exist in Vilnius (clocks go 3→4).
        let now = at("2026-03-28T12:00:00Z");
        let reset = from_text("resets Mar 29, 3:30am (Europe/Vilnius)", Zone::default(), now);
        assert_eq!(reset, Some(at("2026-03-29T01:30:00Z")));
    }
}
