//! The clock templates read through `strftime_now`, and [`DateTime`], formatted as Python's
//! `datetime.strftime` formats it on Linux (glibc) by [`jiff`]'s `strftime` in its POSIX
//! locale.

use std::cell::Cell;

use jiff::fmt::strtime::{BrokenDownTime, Config, PosixCustom};
use jiff::tz::Offset;
use jiff::Timestamp;

/// A calendar date and time of day, for `strftime_now`.
///
/// `transformers` formats its machine's local time; [`DateTime::now_utc`] is what this crate
/// uses when [`RenderOptions::now`](super::RenderOptions::now) is not set, as it has no time
/// zone database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    /// The year, -9999 to 9999 (Python's `datetime` takes 1 to 9999).
    pub year: i32,
    /// 1 to 12.
    pub month: u8,
    /// 1 to 31.
    pub day: u8,
    /// 0 to 23.
    pub hour: u8,
    /// 0 to 59.
    pub minute: u8,
    /// 0 to 59, as Python's `datetime` has it.
    pub second: u8,
}

impl DateTime {
    /// A checked date and time; `None` when a field is out of range (e.g. February 30th).
    pub fn new(
        year: i32,
        month: u8,
        day: u8,
        hour: u8,
        minute: u8,
        second: u8,
    ) -> Option<DateTime> {
        let t = DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
        };
        (DateTime::from_civil(t.to_civil()) == t).then_some(t)
    }

    /// The UTC date and time `secs` seconds after 1970-01-01 00:00:00 UTC (clamped to the
    /// years -9999 to 9999).
    pub fn from_unix(secs: i64) -> DateTime {
        let secs = secs.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
        let t = Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH);
        DateTime::from_civil(Offset::UTC.to_datetime(t))
    }

    /// The current UTC date and time from the system clock.
    pub fn now_utc() -> DateTime {
        DateTime::from_civil(Offset::UTC.to_datetime(Timestamp::now()))
    }

    fn from_civil(t: jiff::civil::DateTime) -> DateTime {
        DateTime {
            year: t.year().into(),
            month: t.month() as u8,
            day: t.day() as u8,
            hour: t.hour() as u8,
            minute: t.minute() as u8,
            second: t.second() as u8,
        }
    }

    /// The date and time, each field clamped into its range.
    fn to_civil(self) -> jiff::civil::DateTime {
        let year = self.year.clamp(-9999, 9999) as i16;
        let month = self.month.clamp(1, 12) as i8;
        let days = jiff::civil::date(year, month, 1).days_in_month();
        jiff::civil::datetime(
            year,
            month,
            (self.day as i8).clamp(1, days),
            self.hour.min(23) as i8,
            self.minute.min(59) as i8,
            self.second.min(59) as i8,
            0,
        )
    }

    /// Formats like Python's `datetime.strftime` on Linux (glibc), for a naive date time:
    /// `%Y-%m-%d`, `%d %b %Y`, `%A, %B %-d`, `%I:%M %p`, `%j`, `%U`, `%V`, `%c`, ... with the
    /// `-`, `_`, `0`, `^` and `#` flags; `%z` and `%Z` are empty, `%f` is `000000`, `%s`
    /// counts seconds as if the time were UTC, and a directive glibc does not know is kept as
    /// it is. Fields out of range are clamped into it.
    pub fn strftime(&self, format: &str) -> String {
        let civil = self.to_civil();
        let config = Config::new().custom(PosixCustom::new()).lenient(true);
        BrokenDownTime::from(civil)
            .to_string_with_config(&config, glibc_to_jiff(format, civil))
            .unwrap_or_default()
    }
}

/// The directives glibc's `strftime` and jiff's format alike (in jiff's POSIX locale).
const SHARED_DIRECTIVES: &str = "aAbBcCdDeFgGhHIjklmMnpPrRStTuUVwWxXyY";

/// `format` with what jiff formats differently from glibc for a naive time done here: jiff
/// asks a time zone for `%z`, `%Z` and `%s`, prints `%f` with one digit, and knows
/// directives glibc does not (`%q`, `%N`, `%Q`, `%:z`, `%.f`, widths), which glibc keeps as
/// text. `strftime_like_python` (tests/chat_templates.rs) checks each of these.
fn glibc_to_jiff(format: &str, civil: jiff::civil::DateTime) -> String {
    let mut out = String::with_capacity(format.len() + 8);
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let directive = &rest[at + 1..];
        let flag_len = usize::from(directive.starts_with(['-', '_', '0', '^', '#']));
        let Some(letter) = directive[flag_len..].chars().next() else {
            // A lone `%` (and flag) at the end stays as it is.
            out.push_str("%%");
            out.push_str(directive);
            return out;
        };
        let len = 1 + flag_len + letter.len_utf8();
        match letter {
            'z' | 'Z' => {}
            'f' => out.push_str("000000"),
            's' => {
                let secs = Offset::UTC.to_timestamp(civil).map(Timestamp::as_second);
                out.push_str(&secs.unwrap_or_default().to_string());
            }
            '%' => out.push_str("%%"),
            c if SHARED_DIRECTIVES.contains(c) => out.push_str(&rest[at..at + len]),
            _ => {
                out.push_str("%%");
                out.push_str(&directive[..len - 1]);
            }
        }
        rest = &rest[at + len..];
    }
    out.push_str(rest);
    out
}

thread_local! {
    /// The clock of the render running on this thread (`None`: the system clock).
    static CLOCK: Cell<Option<DateTime>> = const { Cell::new(None) };
}

/// Sets [`CLOCK`] for one render and restores it after.
pub(super) struct ClockGuard(Option<DateTime>);

impl ClockGuard {
    pub(super) fn set(now: Option<DateTime>) -> ClockGuard {
        ClockGuard(CLOCK.with(|c| c.replace(now)))
    }
}

impl Drop for ClockGuard {
    fn drop(&mut self) {
        CLOCK.with(|c| c.set(self.0));
    }
}

/// `strftime_now(format)`: the render's clock, or the system's, formatted.
pub(super) fn strftime_now(format: &str) -> String {
    CLOCK
        .with(Cell::get)
        .unwrap_or_else(DateTime::now_utc)
        .strftime(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_round_trip() {
        let t = DateTime::from_unix(1_720_274_709);
        assert_eq!(t, DateTime::new(2024, 7, 6, 14, 5, 9).unwrap());
        assert_eq!(t.strftime("%s"), "1720274709");
        assert_eq!(DateTime::new(2023, 2, 29, 0, 0, 0), None);
        assert_eq!(DateTime::from_unix(i64::MAX).year, 9999);
        // Fields out of range are clamped.
        let odd = DateTime {
            month: 13,
            day: 40,
            ..t
        };
        assert_eq!(odd.strftime("%F"), "2024-12-31");
    }

    #[test]
    fn iso_weeks() {
        // (date, %G-W%V-%u) as glibc prints them
        let cases = [
            ((2021, 1, 1), "2020-W53-5"),
            ((2024, 12, 30), "2025-W01-1"),
            ((2024, 7, 6), "2024-W27-6"),
            ((2026, 1, 4), "2026-W01-7"),
        ];
        for ((y, m, d), want) in cases {
            let t = DateTime::new(y, m, d, 0, 0, 0).unwrap();
            assert_eq!(t.strftime("%G-W%V-%u"), want);
        }
    }
}
