//! `page_number` paging: 10 entries a page, pages counted from 1.

use serde::Serialize;

use crate::error::ApiError;

pub const PAGE_SIZE: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageNumber(pub usize);

impl PageNumber {
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            None => Ok(Self(1)),
            Some(s) => s
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=1_000_000).contains(n))
                .map(Self)
                .ok_or_else(|| ApiError::field("page_number", format!("'{s}' is not a whole number from 1"))),
        }
    }
    /// Entries to skip before this page.
    pub fn offset(self) -> usize {
        (self.0 - 1) * PAGE_SIZE
    }
}

/// The paging fields of a list response. With nothing to list: `null`, `0`, `null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageInfo {
    pub next_page: Option<usize>,
    pub pages: usize,
    pub prev_page: Option<usize>,
}

impl PageInfo {
    pub fn new(page: PageNumber, total: usize) -> Self {
        let pages = total.div_ceil(PAGE_SIZE);
        let p = page.0;
        Self {
            next_page: (p < pages).then_some(p + 1),
            pages,
            // Past the end, the previous page is the last one that has entries.
            prev_page: (p > 1 && pages > 0).then_some((p - 1).min(pages)),
        }
    }
}

/// Which end of the sort-key range a list starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Sort-key order: creation (or `recorded_at`) order.
    OldestFirst,
    /// Reverse sort-key order, as Roam lists trips and geofences.
    NewestFirst,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_five_entries_make_three_pages() {
        let info = |p| PageInfo::new(PageNumber(p), 25);
        assert_eq!(info(1), PageInfo { next_page: Some(2), pages: 3, prev_page: None });
        assert_eq!(info(3), PageInfo { next_page: None, pages: 3, prev_page: Some(2) });
        assert_eq!(info(4), PageInfo { next_page: None, pages: 3, prev_page: Some(3) });
        assert_eq!(PageInfo::new(PageNumber(1), 0), PageInfo { next_page: None, pages: 0, prev_page: None });
    }

    #[test]
    fn page_number_must_be_positive() {
        assert!(PageNumber::parse(Some("0")).is_err());
        assert!(PageNumber::parse(Some("x")).is_err());
        assert_eq!(PageNumber::parse(Some("3")).unwrap().offset(), 20);
    }
}
