//! Small statistics shared by the domain modules.

/// The median (the mean of the two middle values for an even count); `None` when empty.
/// Reorders `values`: a selection, not a sort (a trip's medians run over all its fixes).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let (below, &mut upper, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(upper);
    }
    // The lower middle value is the largest of those below the upper one.
    let lower = below.iter().copied().max_by(f64::total_cmp).unwrap_or(upper);
    Some((lower + upper) / 2.0)
}

/// Rounded to centimetres (figures in metres as the interface gives them).
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [12.0, 10.0]), Some(11.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn selects_what_a_sort_finds() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 40) as f64 / 1000.0
        };
        for n in 1..200 {
            // Few distinct values too, so the middle ones repeat.
            let values: Vec<f64> = (0..n).map(|_| if n % 3 == 0 { (next() % 4.0).floor() } else { next() }).collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let expected = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
            assert_eq!(median(&mut values.clone()), Some(expected), "{values:?}");
        }
    }
}
