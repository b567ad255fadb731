//! The iteration order of a `java.util.HashMap<String, _>` filled in a given order: what Connect's
//! REST `PATCH` writes a partition's members in (it reads the body back through its
//! `JsonConverter`, which makes every JSON object such a map).
//!
//! A `HashMap` made with `new HashMap<>()` starts with 16 buckets and doubles when it holds more
//! than three quarters of its bucket count, or when a bucket reaches 9 entries while it has fewer
//! than 64 buckets. Iteration walks the buckets in order, each in insertion order (a resize keeps
//! that order). A bucket of 9 or more names in a table of 64 or more becomes a tree, whose order
//! is not modelled (it takes 9 names colliding in their low 6 hash bits).

/// `String.hashCode()`: over UTF-16 code units, `h = 31 * h + c`, wrapping.
fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `HashMap.hash`: the high half folded into the low one.
fn spread(s: &str) -> u32 {
    let h = string_hash(s) as u32;
    h ^ (h >> 16)
}

/// The positions of `names` (distinct, in insertion order) in the order a `HashMap` filled with
/// them iterates.
pub(crate) fn hash_order<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
    let hashes: Vec<u32> = names.into_iter().map(spread).collect();
    let mut buckets: u32 = 16;
    for (size, &h) in hashes.iter().enumerate() {
        let in_bucket = hashes[..size]
            .iter()
            .filter(|&&o| o & (buckets - 1) == h & (buckets - 1))
            .count();
        if in_bucket >= 8 && buckets < 64 {
            buckets *= 2;
        }
        if (size + 1) as u64 * 4 > u64::from(buckets) * 3 {
            buckets *= 2;
        }
    }
    let mut order: Vec<usize> = (0..hashes.len()).collect();
    order.sort_by_key(|&i| hashes[i] & (buckets - 1));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ordered<'a>(names: &[&'a str]) -> Vec<&'a str> {
        hash_order(names.iter().copied())
            .into_iter()
            .map(|i| names[i])
            .collect()
    }

    #[test]
    fn string_hash_is_javas() {
        // Values of "...".hashCode() in Java.
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("hello"), 99162322);
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
        // An astral character counts as its two UTF-16 units.
        assert_eq!(string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn mirror_maker_partitions_come_in_hash_order() {
        assert_eq!(
            ordered(&["cluster", "topic", "partition"]),
            ["cluster", "partition", "topic"]
        );
        // Colliding names keep their insertion order.
        assert_eq!(ordered(&["Ea", "FB"]), ["Ea", "FB"]);
        assert_eq!(ordered(&["FB", "Ea"]), ["FB", "Ea"]);
    }

    #[test]
    fn a_thirteenth_name_doubles_the_table() {
        let names: Vec<String> = (0..13).map(|i| format!("m{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let by_32 = |s: &&str| spread(s) & 31;
        let mut want = refs.clone();
        want.sort_by_key(by_32);
        assert_eq!(ordered(&refs), want);
        assert_eq!(ordered(&refs[..12]).len(), 12);
    }
}
