//! `wal inspect` and `wal repair`: a commit buffer's write-ahead log, read and mended offline.

use std::path::PathBuf;
use std::process::ExitCode;

use connect_offsets::Result;
use connect_offsets::internal::dead_letter::DeadLetterFile;
use connect_offsets::internal::wal::frame::FrameKind;
use connect_offsets::internal::wal::inspect::{self, FrameInfo, FrameStatus, LogScan};

use super::{CORRUPT, print, quoted};

#[derive(clap::Subcommand, Debug)]
pub(crate) enum WalCommand {
    /// Lists every frame: file, offset, length, kind, checksum, writer, seq, entries. Exit code 4
    /// when corrupt frames are found (a torn tail alone is not corruption: recovery cuts it).
    Inspect {
        /// The log directory.
        #[arg(long)]
        dir: PathBuf,
        /// Print JSON: {"frames":[...],"torn":...,"corrupt":N,...}.
        #[arg(long)]
        json: bool,
    },
    /// Cuts a torn tail; with --quarantine also moves corrupt frames to the dead-letter file and
    /// removes them (without it, corrupt frames make it refuse with exit code 4 and change nothing).
    /// Refuses while a commit buffer holds the directory.
    Repair {
        /// The log directory.
        #[arg(long)]
        dir: PathBuf,
        /// Move corrupt frames to the dead-letter file and remove them from the log.
        #[arg(long)]
        quarantine: bool,
        /// The dead-letter file (default: <dir>/dead-letter.jsonl, the commit buffer's default).
        #[arg(long)]
        dead_letter: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(command: WalCommand) -> Result<ExitCode> {
    match command {
        WalCommand::Inspect { dir, json } => {
            let scan = inspect::scan(&dir)?;
            if json {
                print(scan_json(&scan).as_bytes())?;
            } else {
                print_table(&scan)?;
            }
            let gaps = scan.gaps();
            for (w, a, b) in &gaps {
                note!("{}", gap_text(w, *a, *b));
            }
            Ok(if scan.corrupt().is_empty() && gaps.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(CORRUPT)
            })
        }
        WalCommand::Repair {
            dir,
            quarantine,
            dead_letter,
            json,
        } => {
            let dl = quarantine.then(|| {
                DeadLetterFile::new(dead_letter.unwrap_or_else(|| dir.join("dead-letter.jsonl")))
            });
            let report = inspect::repair(&dir, dl.as_ref())?;
            // Quarantined batches leave the chain: say what a writer will then refuse.
            for (w, a, b) in inspect::scan(&dir)?.gaps() {
                note!("{}", gap_text(&w, a, b));
            }
            if json {
                let list = |v: &[(PathBuf, u64, u64)], a: &str, b: &str| {
                    v.iter()
                        .map(|(p, x, y)| {
                            format!(
                                "{{\"file\":{},\"{a}\":{x},\"{b}\":{y}}}",
                                quoted(&p.display().to_string())
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let removed: Vec<String> = report
                    .removed_files
                    .iter()
                    .map(|p| quoted(&p.display().to_string()))
                    .collect();
                print(
                    format!(
                        "{{\"cut\":[{}],\"quarantined\":[{}],\"removed_files\":[{}],\"dead_letter\":{}}}",
                        list(&report.cut, "cut_to", "bytes"),
                        list(&report.quarantined, "offset", "length"),
                        removed.join(","),
                        dl.as_ref()
                            .map_or("null".into(), |d| quoted(&d.path().display().to_string()))
                    )
                    .as_bytes(),
                )?;
            } else if report.is_empty() {
                print(format!("{}: nothing to repair", dir.display()).as_bytes())?;
            } else {
                for (p, at, n) in &report.cut {
                    print(
                        format!("cut torn tail: {} at byte {at} ({n} bytes)", p.display())
                            .as_bytes(),
                    )?;
                }
                for (p, off, n) in &report.quarantined {
                    print(
                        format!(
                            "quarantined: {} bytes {off}..{} ({n} bytes)",
                            p.display(),
                            off + n
                        )
                        .as_bytes(),
                    )?;
                }
                for p in &report.removed_files {
                    print(format!("removed corrupt snapshot: {}", p.display()).as_bytes())?;
                }
                if let Some(d) = &dl
                    && !report.quarantined.is_empty()
                {
                    print(format!("dead-letter file: {}", d.path().display()).as_bytes())?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn gap_text(writer: &str, first: u64, last: u64) -> String {
    format!(
        "warning: batches {first}..{last} of writer `{writer}` are missing from the log (quarantined \
         or removed): a writer refuses to open it unless its store already holds them"
    )
}

fn kind(f: &FrameInfo) -> &'static str {
    match f.kind {
        Some(FrameKind::Batch) => "batch",
        Some(FrameKind::Snapshot) => "snapshot",
        None => "-",
    }
}

fn crc(f: &FrameInfo) -> &'static str {
    match f.crc_ok {
        Some(true) => "ok",
        Some(false) => "bad",
        None => "-",
    }
}

fn status(f: &FrameInfo) -> (&'static str, &str) {
    match &f.status {
        FrameStatus::Ok => ("ok", ""),
        FrameStatus::Torn(r) => ("torn", r),
        FrameStatus::Corrupt(r) => ("corrupt", r),
    }
}

fn file_name(f: &FrameInfo) -> String {
    f.file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| f.file.display().to_string())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn print_table(scan: &LogScan) -> Result<()> {
    print(b"FILE\tOFFSET\tLENGTH\tKIND\tCRC\tSTATUS\tWRITER\tSEQ\tENTRIES\tDETAIL")?;
    for f in scan.frames() {
        let (st, why) = status(f);
        print(
            format!(
                "{}\t{}\t{}\t{}\t{}\t{st}\t{}\t{}\t{}\t{why}",
                file_name(f),
                f.offset,
                f.len,
                kind(f),
                crc(f),
                opt(f.writer.as_deref()),
                opt(f.seq),
                opt(f.entries),
            )
            .as_bytes(),
        )?;
    }
    let seqs: Vec<String> = scan
        .seq_ranges()
        .into_iter()
        .map(|(w, r)| {
            let ranges: Vec<String> = r.iter().map(|(a, b)| format!("{a}..{b}")).collect();
            format!("writer {w} seqs {}", ranges.join(","))
        })
        .collect();
    note!(
        "{}: {} files, {} intact frames, {}, {} corrupt region(s){}{}",
        scan.dir.display(),
        scan.files.len(),
        scan.intact(),
        if scan.torn().is_some() {
            "a torn tail (recovery cuts it)"
        } else {
            "no torn tail"
        },
        scan.corrupt().len(),
        if seqs.is_empty() { "" } else { "; " },
        seqs.join("; ")
    );
    Ok(())
}

fn scan_json(scan: &LogScan) -> String {
    let frames: Vec<String> = scan
        .frames()
        .map(|f| {
            let (st, why) = status(f);
            let conns: Vec<String> = f.connectors.iter().map(|(c, _)| quoted(c)).collect();
            format!(
                "{{\"file\":{},\"offset\":{},\"length\":{},\"kind\":{},\"crc_ok\":{},\"status\":\"{st}\",\"reason\":{},\"writer\":{},\"seq\":{},\"entries\":{},\"connectors\":[{}]}}",
                quoted(&f.file.display().to_string()),
                f.offset,
                f.len,
                f.kind.map_or("null".into(), |_| quoted(kind(f))),
                f.crc_ok.map_or("null".into(), |b| b.to_string()),
                if why.is_empty() { "null".into() } else { quoted(why) },
                f.writer.as_deref().map_or("null".into(), quoted),
                f.seq.map_or("null".into(), |s| s.to_string()),
                f.entries.map_or("null".into(), |s| s.to_string()),
                conns.join(",")
            )
        })
        .collect();
    format!(
        "{{\"dir\":{},\"files\":{},\"intact\":{},\"torn\":{},\"corrupt\":{},\"gaps\":[{}],\"frames\":[{}]}}",
        quoted(&scan.dir.display().to_string()),
        scan.files.len(),
        scan.intact(),
        scan.torn().is_some(),
        scan.corrupt().len(),
        scan.gaps()
            .iter()
            .map(|(w, a, b)| format!("{{\"writer\":{},\"first\":{a},\"last\":{b}}}", quoted(w)))
            .collect::<Vec<_>>()
            .join(","),
        frames.join(",")
    )
}
