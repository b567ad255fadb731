//! Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`) and the Java producer's
//! default partition choice. librdkafka's own default partitioner is CRC32-based and would put keys on
//! other partitions than Connect does: the Kafka backend sets `partitioner=murmur2_random` and uses
//! this function to check it.

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// Kafka's murmur2 of `data`, as Java's signed 32-bit result.
pub fn murmur2(data: &[u8]) -> i32 {
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The topic partition the Java producer picks for `key` among `partitions`:
/// `(murmur2(key) & 0x7fffffff) % partitions`.
///
/// # Panics
/// If `partitions` is zero.
pub fn partition_for(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    ((murmur2(key) as u32) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    // The vectors from shared/design/kafka-connect-format.md.
    #[test]
    fn connect_vectors() {
        let cases: [(&[u8], i32, [u32; 3]); 4] = [
            (
                br#"["local-file-source",{"filename":"/tmp/test.txt"}]"#,
                -598596227,
                [21, 21, 0],
            ),
            (br#"["my-conn",{"a":1}]"#, -2087815701, [22, 47, 2]),
            (
                br#"["dbz",{"server":"dbserver1"}]"#,
                -327644006,
                [17, 42, 0],
            ),
            (br#"["c",null]"#, -465462148, [0, 0, 1]),
        ];
        for (key, hash, parts) in cases {
            assert_eq!(murmur2(key), hash, "{}", String::from_utf8_lossy(key));
            for (n, want) in [25, 50, 3].into_iter().zip(parts) {
                assert_eq!(
                    partition_for(key, n),
                    want,
                    "{} over {n}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
}
