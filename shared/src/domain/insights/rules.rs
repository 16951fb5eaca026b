//! The thresholds of the insight rules (home, work, points of interest), apart so that the
//! aggregate, which keeps what these rules can still look at, and the rules themselves
//! ([`super::classify`]) share them without importing each other.

/// Home needs at least this many local days with 30 minutes there.
pub const MIN_DAYS: usize = 3;
/// After this many nights in a row at another place, that place is home.
pub const MOVE_NIGHTS: usize = 10;
/// A night (22:00-06:00 local) is spent where the person was for at least this long (seconds).
pub const NIGHT_MIN_SECONDS: i64 = 3 * 3600;
/// Work is judged over this many latest weeks (Monday to Sunday, local).
pub const WORK_WINDOW_WEEKS: i64 = 6;
/// Weeks (of the window) with a working week at the place that work needs.
pub const WORK_MIN_WEEKS: usize = 3;
/// A working week: at least this many hours at the place, Monday to Friday ...
pub const WORK_MIN_HOURS_PER_WEEK: i64 = 10;
/// ... on at least this many weekdays.
pub const WORK_MIN_WEEKDAYS: usize = 2;
/// A point of interest is visited on at least this many distinct local days.
pub const POI_MIN_DAYS: usize = 2;
