//! The warm start: a file holding the loaded `State`, the identity of the topic it was read from
//! and where the reader stood in each partition, so the next open reads only what was written
//! since. A snapshot is used only when nothing could have changed the records it holds behind the
//! reader's back (`check`); otherwise the store reads the topic whole and says why.
//!
//! ```text
//! <snapshot.dir>/<topic>.snapshot, little-endian; str = u32 length + UTF-8; lists: u32 count first
//! 0 magic "COSNAP\0\0" | 8 u32 version (2) | 12 u64 body length | 20 u32 CRC-32 of body | 24 body:
//!   str cluster id, str topic, 16 topic id, i64 read_at_ms
//!   partitions (i64 log start offset seen, i64 next offset to read); writers (str, u64 seq)
//!   namespaces: str name, u64 hash seed, u64 keys, runs of 65,536 keys (u64 keys, u64 bytes),
//!   then every key's entry (u32 length, `state::Entry`), run after run, in bucket order
//! ```
//! Every field and the checks on read: `docs/format.md`, section "Kafka warm-start snapshot".

use std::io;
use std::path::{Path, PathBuf};

use crate::fs::{RealFs, WalFs};
use crate::{Error, Result};

use super::state::{Entry, Keys, Run, State};

const MAGIC: &[u8; 8] = b"COSNAP\0\0";
const VERSION: u32 = 2;
/// Keys in a run of a snapshot's entries (see the module documentation).
const RUN_KEYS: usize = 1 << 16;
const HEADER: usize = 24;

/// Which incarnation of which topic on which cluster a snapshot was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub cluster_id: String,
    pub topic: String,
    pub topic_id: [u8; 16],
    pub partitions: i32,
}

/// A snapshot as read back from its file.
pub(crate) struct Snapshot {
    pub identity: Identity,
    pub read_at_ms: i64,
    /// The log start offset of each partition when the records in `state` were read.
    pub start: Vec<i64>,
    /// The next offset to read in each partition.
    pub next: Vec<i64>,
    pub state: State,
}

/// Why a snapshot is not used (the whole topic is read instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// The file is damaged: bad checksum, truncated, not a snapshot, or another format version.
    Corrupt,
    /// The file cannot be read (an I/O error, or no permission).
    Unreadable,
    /// Taken of another Kafka cluster (another cluster id).
    OtherCluster,
    /// Taken of another topic.
    OtherTopic,
    /// The topic was deleted and re-created since (another topic id).
    Recreated,
    /// The topic has another number of partitions now.
    PartitionCount,
    /// Older than the topic's `delete.retention.ms`: compaction may have removed tombstones the
    /// snapshot never saw.
    TooOld,
    /// A partition ends below where the snapshot stopped reading, or its log start offset moved
    /// past what the snapshot saw (records deleted).
    Truncated,
    /// The cluster id or topic id cannot be had now, so the snapshot cannot be checked.
    Unverifiable,
}

/// What the topic looks like now, to check a snapshot against.
pub(crate) struct Now<'a> {
    pub identity: Option<&'a Identity>,
    pub delete_retention_ms: Option<i64>,
    pub now_ms: i64,
    pub start: &'a [i64],
    pub end: &'a [i64],
}

/// The snapshot file of `topic` in `dir`.
pub(crate) fn path(dir: &Path, topic: &str) -> PathBuf {
    dir.join(format!("{topic}.snapshot"))
}

/// Whether `snap` may stand in for reading its topic up to `snap.next`, and if not why (with the
/// details for the log line).
pub(crate) fn check(snap: &Snapshot, now: &Now<'_>) -> std::result::Result<(), (Fallback, String)> {
    let Some(id) = now.identity else {
        return Err((
            Fallback::Unverifiable,
            "the cluster id or topic id cannot be had".into(),
        ));
    };
    let had = &snap.identity;
    if had.cluster_id != id.cluster_id {
        return Err((
            Fallback::OtherCluster,
            format!(
                "taken of cluster `{}`, this is `{}`",
                had.cluster_id, id.cluster_id
            ),
        ));
    }
    if had.topic != id.topic {
        return Err((
            Fallback::OtherTopic,
            format!("taken of topic `{}`", had.topic),
        ));
    }
    if had.topic_id != id.topic_id {
        return Err((
            Fallback::Recreated,
            "the topic was deleted and re-created since (another topic id)".into(),
        ));
    }
    if had.partitions != id.partitions {
        return Err((
            Fallback::PartitionCount,
            format!(
                "taken with {} partitions, the topic has {}",
                had.partitions, id.partitions
            ),
        ));
    }
    let age = now.now_ms.saturating_sub(snap.read_at_ms);
    if age < 0 {
        return Err((
            Fallback::TooOld,
            format!(
                "taken {} ms in the future (the clock moved back): its age is unknown",
                -age
            ),
        ));
    }
    match now.delete_retention_ms {
        Some(keep) if age < keep => {}
        Some(keep) => {
            return Err((
                Fallback::TooOld,
                format!(
                    "{age} ms old, the topic keeps tombstones {keep} ms (delete.retention.ms): \
                     some it never saw may be gone"
                ),
            ));
        }
        None => {
            return Err((
                Fallback::Unverifiable,
                "the topic's delete.retention.ms is unknown".into(),
            ));
        }
    }
    for p in 0..snap.next.len() {
        let (start, end) = (now.start[p], now.end[p]);
        if end < snap.next[p] || start > snap.start[p] {
            return Err((
                Fallback::Truncated,
                format!(
                    "partition {p} now spans offsets {start}..{end}, the snapshot read {}..{}",
                    snap.start[p], snap.next[p]
                ),
            ));
        }
    }
    Ok(())
}

/// The file bytes of a snapshot of `state`.
pub(crate) fn encode(
    identity: &Identity,
    read_at_ms: i64,
    start: &[i64],
    next: &[i64],
    state: &State,
) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + state.len() * 96);
    put_bytes(&mut body, identity.cluster_id.as_bytes());
    put_bytes(&mut body, identity.topic.as_bytes());
    body.extend_from_slice(&identity.topic_id);
    body.extend_from_slice(&read_at_ms.to_le_bytes());
    body.extend_from_slice(&(next.len() as u32).to_le_bytes());
    for (s, n) in start.iter().zip(next) {
        body.extend_from_slice(&s.to_le_bytes());
        body.extend_from_slice(&n.to_le_bytes());
    }
    let writers = state.writers();
    body.extend_from_slice(&(writers.len() as u32).to_le_bytes());
    for (w, seq) in &writers {
        put_bytes(&mut body, w.as_bytes());
        body.extend_from_slice(&seq.to_le_bytes());
    }
    let namespaces: Vec<_> = state.namespace_entries().collect();
    body.extend_from_slice(&(namespaces.len() as u32).to_le_bytes());
    for (ns, seed, entries) in namespaces {
        put_bytes(&mut body, ns.as_bytes());
        body.extend_from_slice(&seed.to_le_bytes());
        body.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let runs = entries.chunks(RUN_KEYS);
        body.extend_from_slice(&(runs.len() as u32).to_le_bytes());
        for run in runs.clone() {
            let bytes: usize = run.iter().map(|e| 4 + e.len()).sum();
            body.extend_from_slice(&(run.len() as u64).to_le_bytes());
            body.extend_from_slice(&(bytes as u64).to_le_bytes());
        }
        for entry in runs.flatten() {
            put_bytes(&mut body, entry);
        }
    }
    let mut file = Vec::with_capacity(HEADER + body.len());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&VERSION.to_le_bytes());
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    file.extend_from_slice(&body);
    file
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// `decode_read`, checksumming the body here.
#[cfg(test)]
pub(crate) fn decode(file: Vec<u8>) -> std::result::Result<Snapshot, String> {
    let crc = crc32fast::hash(file.get(HEADER..).unwrap_or_default());
    decode_read(file, crc)
}

/// Reads a snapshot back from its file bytes and the CRC-32 of its body ([`read`] computes it as
/// it reads), or says what is wrong with them. The bytes become the state's: its entries are
/// indexed where they are, not copied.
fn decode_read(file: Vec<u8>, body_crc: u32) -> std::result::Result<Snapshot, String> {
    if file.len() < HEADER {
        return Err(format!("{} bytes, shorter than the header", file.len()));
    }
    if &file[..8] != MAGIC {
        return Err("not a snapshot file (bad magic)".into());
    }
    let version = u32::from_le_bytes(file[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(format!(
            "format version {version}, this build reads {VERSION}"
        ));
    }
    let len = u64::from_le_bytes(file[12..20].try_into().expect("8 bytes"));
    let body = &file[HEADER..];
    if body.len() as u64 != len {
        return Err(format!(
            "the body is {} bytes, the header says {len} (truncated or extended)",
            body.len()
        ));
    }
    let crc = u32::from_le_bytes(file[20..24].try_into().expect("4 bytes"));
    if body_crc != crc {
        return Err("bad checksum".into());
    }
    // Offsets into the file index its entries (not past 4 GiB).
    let in_place = u32::try_from(file.len()).is_ok();
    let mut r = Cursor(body);
    let cluster_id = r.string()?;
    let topic = r.string()?;
    let topic_id: [u8; 16] = r.take(16)?.try_into().expect("16 bytes");
    let read_at_ms = r.i64()?;
    let partitions = r.u32()? as usize;
    let mut start = Vec::with_capacity(partitions.min(1 << 16));
    let mut next = Vec::with_capacity(partitions.min(1 << 16));
    for _ in 0..partitions {
        start.push(r.i64()?);
        next.push(r.i64()?);
    }
    let mut writers = Vec::new();
    for _ in 0..r.u32()? {
        let w = r.string()?;
        writers.push((w, r.u64()?));
    }
    let mut namespaces = Vec::new();
    for _ in 0..r.u32()? {
        let ns = r.string()?;
        let mut keys = Keys::with_seed(r.u64()?);
        let n = r.u64()?;
        let runs = r.u32()? as usize;
        // Bounded by what the body can hold, so that a damaged count cannot make a huge table.
        let mut sizes = Vec::with_capacity(runs.min(r.0.len() / 16));
        for _ in 0..runs {
            sizes.push((r.u64()?, r.u64()?));
        }
        let (keys_in_runs, bytes) = sizes.iter().fold((0u64, 0u64), |(k, b), &(rk, rb)| {
            (k.saturating_add(rk), b.saturating_add(rb))
        });
        let at = file.len() - r.0.len();
        let entries = r.take(usize::try_from(bytes).unwrap_or(usize::MAX))?;
        // A key takes at least 8 bytes.
        if keys_in_runs != n || n > bytes / 8 {
            return Err(format!(
                "namespace `{ns}`: {n} keys, its runs hold {keys_in_runs} in {bytes} bytes"
            ));
        }
        if in_place {
            let mut runs = Vec::with_capacity(sizes.len());
            let mut start = at;
            for (run_keys, run_bytes) in sizes {
                // Within the file (checked above), which is under 4 GiB.
                let end = start + run_bytes as usize;
                runs.push(Run {
                    at: start as u32,
                    end: end as u32,
                    keys: run_keys as u32,
                });
                start = end;
            }
            keys.index(&file, &runs)
                .map_err(|e| format!("namespace `{ns}`: {e}"))?;
        } else {
            // Past 4 GiB offsets into the file cannot index it: an allocation a key instead.
            let mut r = Cursor(entries);
            for _ in 0..n {
                let before = keys.len();
                let entry = Entry::from_bytes(r.bytes()?.into())
                    .ok_or_else(|| format!("namespace `{ns}`: a malformed entry"))?;
                keys.put(&[], entry);
                if keys.len() == before {
                    return Err(format!("namespace `{ns}`: a key twice"));
                }
            }
            if !r.0.is_empty() {
                return Err(format!(
                    "namespace `{ns}`: its runs hold {} bytes after its last entry",
                    r.0.len()
                ));
            }
        }
        namespaces.push((ns, keys));
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the last form", r.0.len()));
    }
    let mut state = State::with_base(if in_place { file } else { Vec::new() });
    for (w, seq) in writers {
        state.note_seq(&w, seq);
    }
    for (ns, keys) in namespaces {
        state.insert_namespace(ns, keys);
    }
    Ok(Snapshot {
        identity: Identity {
            cluster_id,
            topic,
            topic_id,
            partitions: partitions as i32,
        },
        read_at_ms,
        start,
        next,
        state,
    })
}

/// The unread rest of the body.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("the body ends inside a field".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn i64(&mut self) -> std::result::Result<i64, String> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn bytes(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "a string is not UTF-8".into())
    }
}

/// A snapshot file being read and decoded on a thread of its own.
pub(crate) struct Loading(std::thread::JoinHandle<Result<Option<Decoded>>>);

/// A snapshot file's contents, or what is wrong with them.
pub(crate) type Decoded = std::result::Result<Snapshot, String>;

impl Loading {
    pub(crate) fn start(path: PathBuf) -> Loading {
        Loading(std::thread::spawn(move || {
            read(&path).map(|file| file.map(|(bytes, crc)| decode_read(bytes, crc)))
        }))
    }

    /// The snapshot: `None` when there is no file.
    pub(crate) fn join(self) -> Result<Option<Decoded>> {
        self.0
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// The snapshot file's bytes and the CRC-32 of its body, `None` when there is no file. Read in
/// two halves on two threads, each checksummed a megabyte at a time as it arrives, while it is
/// in the cache: the kernel's copy, the faults on the fresh buffer and the checksum's own pass
/// over the file were a third of a warm start on one core.
pub(crate) fn read(path: &Path) -> Result<Option<(Vec<u8>, u32)>> {
    const STEP: usize = 1 << 20;
    let failed = |e: io::Error| {
        Error::store(
            "kafka",
            format!("cannot read the snapshot {}: {e}", path.display()),
        )
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let len = usize::try_from(file.metadata().map_err(failed)?.len())
        .map_err(|_| failed(io::Error::other("larger than memory")))?;
    let mut bytes = vec![0u8; len];
    let (head, tail) = bytes.split_at_mut(len / 2);
    let read = |part: &mut [u8], from: usize| -> io::Result<crc32fast::Hasher> {
        let mut crc = crc32fast::Hasher::new();
        for (i, step) in part.chunks_mut(STEP).enumerate() {
            let at = from + i * STEP;
            std::os::unix::fs::FileExt::read_exact_at(&file, step, at as u64)?;
            crc.update(&step[HEADER.saturating_sub(at).min(step.len())..]);
        }
        Ok(crc)
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| read(tail, len / 2));
        (read(head, 0), second.join())
    });
    let second = second.unwrap_or_else(|p| std::panic::resume_unwind(p));
    match first.and_then(|mut crc| {
        crc.combine(&second?);
        Ok(crc.finalize())
    }) {
        Ok(crc) => Ok(Some((bytes, crc))),
        // Cut while we read it (not by us: we replace it by renaming): read as damaged.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Some((Vec::new(), 0))),
        Err(e) => Err(failed(e)),
    }
}

/// Replaces the snapshot at `path` with `bytes` atomically: a temporary file, synced, renamed over
/// it, and the directory synced, so a crash leaves the old snapshot or the new one, never half.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let fs = RealFs;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension(format!(
        "tmp-{}",
        crate::store::kafka::config::unique_suffix()
    ));
    let written = (|| {
        let mut f = fs.open_append(&tmp)?;
        f.append(bytes)?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, path)?;
        fs.sync_dir(dir)
    })();
    if written.is_err() {
        let _ = fs.remove(&tmp);
    }
    written
}

/// Makes `dir` (the `snapshot.dir` parameter) if missing, refusing a path that is not a directory.
pub(crate) fn prepare_dir(dir: &Path) -> Result<()> {
    RealFs.create_dir_all(dir).map_err(|e| {
        Error::Settings(format!(
            "kafka store: `snapshot.dir` {} is not a usable directory: {e}",
            dir.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OffsetKey;
    use crate::store::kafka::topic::state::Stamp;
    use crate::{Offset, Partition};

    fn identity() -> Identity {
        Identity {
            cluster_id: "c1".into(),
            topic: "t".into(),
            topic_id: [7; 16],
            partitions: 2,
        }
    }

    fn sample() -> State {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let mut s = State::default();
        let at = |timestamp, partition, offset| Stamp {
            timestamp,
            partition,
            offset,
        };
        s.put(
            br#"[ "c", {"a": 1, "b": 2} ]"#,
            ab,
            Offset::new().with("n", 1),
            at(5, 0, 3),
        );
        s.put(
            &ba.connect_key(),
            ba,
            Offset::new().with("n", 2),
            at(9, 1, 0),
        );
        s.note_seq("w", 4);
        s
    }

    #[test]
    fn round_trips_every_form_and_seq() {
        let state = sample();
        let bytes = encode(&identity(), 42, &[0, 1], &[10, 20], &state);
        let back = decode(bytes).unwrap();
        assert_eq!(back.identity, identity());
        assert_eq!(
            (back.read_at_ms, back.start, back.next),
            (42, vec![0, 1], vec![10, 20])
        );
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let forms = |s: &State| {
            (
                s.live_records(&ab),
                s.get(&ab),
                s.partitions("c"),
                s.namespaces(),
            )
        };
        assert_eq!(forms(&back.state), forms(&state));
        assert_eq!(forms(&state).0.len(), 2);
        assert_eq!(back.state.writers(), vec![("w".to_string(), 4)]);
    }

    /// A state read from a snapshot keeps its entries in the file's bytes: changes after the load
    /// (a new key, a changed one, a reset one) shadow them, and a snapshot of the mix reads back
    /// with the same answers. Keys enough for three runs, checked and hashed on several threads.
    #[test]
    fn changes_after_a_warm_start_shadow_the_snapshot_and_are_kept_in_the_next() {
        let key = |n: i64| OffsetKey::new("c", Partition::new().with("k", n));
        let stamp = |offset| Stamp {
            timestamp: 1,
            partition: 0,
            offset,
        };
        let mut state = State::default();
        for n in 0..140_000 {
            state.put(
                &key(n).connect_key(),
                key(n),
                Offset::new().with("n", n),
                stamp(n),
            );
        }
        let bytes = encode(&identity(), 42, &[0, 1], &[10, 20], &state);
        let mut warm = decode(bytes).unwrap().state;
        warm.put(
            &key(7).connect_key(),
            key(7),
            Offset::new().with("n", -7),
            stamp(200),
        );
        warm.put(
            &key(500_000).connect_key(),
            key(500_000),
            Offset::new().with("n", 500_000),
            stamp(201),
        );
        warm.reset(&key(9).connect_key(), &key(9), 0);
        let answers = |s: &State| {
            let listed = s.partitions("c");
            let got: Vec<_> = [7, 8, 9, 500_000].map(|n| s.get(&key(n))).into();
            (listed, got, s.len())
        };
        let want = answers(&warm);
        assert_eq!(want.1[0], Some(Offset::new().with("n", -7)));
        assert_eq!(want.1[1], Some(Offset::new().with("n", 8)));
        assert_eq!(want.1[2], None);
        assert_eq!(want.1[3], Some(Offset::new().with("n", 500_000)));
        assert_eq!(
            (want.0.len(), want.2),
            (140_000, 140_000),
            "each key listed once"
        );
        let again = encode(&identity(), 43, &[0, 1], &[10, 20], &warm);
        assert_eq!(answers(&decode(again).unwrap().state), want);
    }

    #[test]
    fn every_damage_is_refused() {
        let good = encode(&identity(), 42, &[0, 1], &[10, 20], &sample());
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut version = good.clone();
        version[8] = 9;
        for (what, bytes) in [
            ("checksum", flipped),
            ("version", version),
            ("than the header", good[..10].to_vec()),
            ("truncated", good[..good.len() - 3].to_vec()),
            ("magic", b"garbage garbage garbage garbage".to_vec()),
        ] {
            let e = decode(bytes)
                .err()
                .unwrap_or_else(|| panic!("{what} accepted"));
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    /// Runs that do not match their namespace's keys or entries are refused even under a good
    /// checksum (no snapshot we write has them).
    #[test]
    fn runs_must_hold_their_keys_exactly() {
        let good = encode(&identity(), 42, &[0, 1], &[10, 20], &sample());
        // keys = 1, one run, of 1 key.
        let mut table = 1u64.to_le_bytes().to_vec();
        table.extend_from_slice(&1u32.to_le_bytes());
        table.extend_from_slice(&1u64.to_le_bytes());
        let at = good.windows(table.len()).position(|w| w == table).unwrap() + 12;
        let bytes_at = at + 8;
        let size = u64::from_le_bytes(good[bytes_at..bytes_at + 8].try_into().unwrap());
        let resealed = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bad = good.clone();
            edit(&mut bad);
            let crc = crc32fast::hash(&bad[HEADER..]);
            bad[20..24].copy_from_slice(&crc.to_le_bytes());
            bad
        };
        for (what, bad) in [
            (
                "its runs hold 2",
                resealed(&|b| b[at..at + 8].copy_from_slice(&2u64.to_le_bytes())),
            ),
            (
                "a malformed entry",
                resealed(&|b| b[bytes_at..bytes_at + 8].copy_from_slice(&(size - 1).to_le_bytes())),
            ),
            (
                "ends inside a field",
                resealed(&|b| {
                    b[bytes_at..bytes_at + 8].copy_from_slice(&(size + 99).to_le_bytes())
                }),
            ),
        ] {
            let e = decode(bad)
                .err()
                .unwrap_or_else(|| panic!("{what} accepted"));
            assert!(e.contains(what), "{what}: {e}");
        }
        assert!(decode(resealed(&|_| ())).is_ok());
    }

    proptest::proptest! {
        /// Bytes changed anywhere in the body of a snapshot whose checksum is then made to fit
        /// (what a bug, or someone, could write): refused with a reason, or read into a state
        /// that answers and writes its own snapshot again, never a panic.
        #[test]
        fn a_resealed_damaged_snapshot_is_refused_or_read_whole(
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
                1..6,
            ),
        ) {
            let mut bytes = encode(&identity(), 42, &[0, 1], &[10, 20], &sample());
            for (at, b) in edits {
                let at = HEADER + at.index(bytes.len() - HEADER);
                bytes[at] = b;
            }
            let crc = crc32fast::hash(&bytes[HEADER..]);
            bytes[20..24].copy_from_slice(&crc.to_le_bytes());
            if let Ok(snap) = decode(bytes) {
                let state = snap.state;
                let listed: usize = state.namespaces().iter().map(|ns| state.partitions(ns).len()).sum();
                proptest::prop_assert!(listed <= state.len());
                let again = encode(&snap.identity, 1, &snap.start, &snap.next, &state);
                let back = decode(again).map_err(proptest::test_runner::TestCaseError::fail)?;
                proptest::prop_assert_eq!(back.state.len(), state.len());
            }
        }
    }
}
