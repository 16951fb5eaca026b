//! A bucket's counts per cell, as stored: a list of numbers.

use super::*;

/// Fixes per cell of a bucket, by the cell's two hex digits (the ids' after the bucket's). Stored
/// as an array up to the last cell that holds any (`[0,3,1]`): a bucket of 256 cells decoded
/// into a map of two-digit string keys and written back twice an ingest was about 8 % of an
/// ingest's CPU with geofence events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct Cells(pub(super) Vec<u64>);

impl Cells {
    /// Count one more fix in `cell`; false when `cell` is not two lowercase hex digits.
    pub(super) fn add(&mut self, cell: &str) -> bool {
        let Some(i) = cell_index(cell) else { return false };
        *self.at(i) += 1;
        true
    }

    /// Add `other`'s counts, cell by cell.
    pub(super) fn merge(&mut self, other: &Cells) {
        for (i, n) in other.0.iter().enumerate().filter(|(_, n)| **n > 0) {
            *self.at(i) += n;
        }
    }

    /// Cell `i`'s count, the array grown to hold it.
    pub(super) fn at(&mut self, i: usize) -> &mut u64 {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        &mut self.0[i]
    }

    /// The cells that hold fixes, in order, with their counts.
    pub(super) fn held(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| (cell_name(i), *n))
    }
}

/// Every cell's name, two lowercase hex digits: a page names each cell of its range, and
/// formatting them was a twentieth of a warm history page's CPU.
static CELL_NAMES: [[u8; 2]; 256] = {
    let hex = b"0123456789abcdef";
    let mut names = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        names[i] = [hex[i >> 4], hex[i & 15]];
        i += 1;
    }
    names
};

pub(super) fn cell_name(i: usize) -> &'static str {
    CELL_NAMES.get(i).and_then(|n| std::str::from_utf8(n).ok()).unwrap_or_default()
}

/// The first (`fill` b'0') or last (b'f') possible id of a cell.
pub(super) fn cell_end(bucket: &str, cell: &str, fill: char) -> String {
    let mut id = String::with_capacity(24);
    id.push_str(bucket);
    id.push_str(cell);
    id.extend(std::iter::repeat_n(fill, 24 - CELL_HEX));
    id
}

/// A cell's index: its two hex digits as ids write them (lowercase), else none.
pub(super) fn cell_index(cell: &str) -> Option<usize> {
    let hex = cell.len() == CELL_HEX - BUCKET_HEX && crate::ids::is_hex(cell);
    if hex { usize::from_str_radix(cell, 16).ok() } else { None }
}
