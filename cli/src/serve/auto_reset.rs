//! `serve --reset-orphans-after`: resets the offsets of a connector deleted from the Connect
//! cluster once it has been gone, and its offsets unchanged, for the grace period. Without it a
//! new connector of the same name would resume from them (Connect keeps them forever). The reset
//! is a tool's write like `DELETE /orphans/{name}`: recorded by a store with history, so a rewind
//! brings the offsets back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Server, read_connect_configs};

/// Starts the thread that looks for orphans every quarter of `grace` (every minute at most).
pub(super) fn spawn(server: Arc<Mutex<Server>>, configs_url: String, grace: Duration) {
    let every = (grace / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
    let spawned = std::thread::Builder::new()
        .name("reset-orphans".into())
        .spawn(move || {
            // When this server first saw each connector without a config.
            let mut gone_since: BTreeMap<String, Instant> = BTreeMap::new();
            loop {
                std::thread::sleep(every);
                if let Err(e) = round(&server, &configs_url, grace, &mut gone_since) {
                    tracing::warn!(error = %e, "looking for orphaned offsets failed; trying again");
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the thread that resets orphaned offsets");
    }
}

fn round(
    server: &Mutex<Server>,
    configs_url: &str,
    grace: Duration,
    gone_since: &mut BTreeMap<String, Instant>,
) -> Result<(), String> {
    let cluster = read_connect_configs(configs_url).map_err(|e| e.to_string())?;
    let mut server = server.lock().unwrap_or_else(|p| p.into_inner());
    let configured = cluster.in_use(server.url()).map_err(|e| e.to_string())?;
    let found = {
        let handle = server.open().map_err(|e| e.to_string())?;
        crate::orphans::find(handle.get(), &configured).map_err(|e| e.to_string())?
    };
    gone_since.retain(|name, _| found.iter().any(|o| &o.name == name));
    let now_ms = connect_offsets::internal::time::now_ms();
    for orphan in found {
        let since = *gone_since
            .entry(orphan.name.clone())
            .or_insert_with(Instant::now);
        if !due(since.elapsed(), orphan.last_write_ms, now_ms, grace) {
            continue;
        }
        server.cluster_now = Some(Ok(cluster.clone()));
        let reply = server.reset_orphan(&orphan.name, false);
        if reply.status == 200 {
            tracing::info!(connector = %orphan.name, partitions = orphan.partitions, "reset the offsets of a connector deleted from the Connect cluster");
            note!(
                "reset {} partition(s) of connector {}: it has had no config in the Connect cluster for {:?}",
                orphan.partitions,
                orphan.name,
                grace
            );
            gone_since.remove(&orphan.name);
        } else {
            tracing::warn!(connector = %orphan.name, answer = %reply.body, "resetting orphaned offsets was refused; trying again");
        }
    }
    Ok(())
}

/// Whether an orphan seen gone for `gone_for`, last written at `last_write_ms` (`None`: no time
/// kept, as in a consumer group), is reset now: gone and unchanged for the whole grace period (a
/// deleted connector's tasks may still commit once as they stop).
fn due(gone_for: Duration, last_write_ms: Option<u64>, now_ms: u64, grace: Duration) -> bool {
    let quiet = last_write_ms.is_none_or(|t| now_ms.saturating_sub(t) >= grace.as_millis() as u64);
    gone_for >= grace && quiet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orphan_is_due_once_gone_and_unchanged_for_the_grace_period() {
        let (grace, now) = (Duration::from_secs(60), 1_000_000);
        let s = Duration::from_secs;
        assert!(due(s(60), Some(now - 60_000), now, grace));
        assert!(
            due(s(61), None, now, grace),
            "no write time: gone long enough is enough"
        );
        assert!(
            !due(s(59), Some(now - 120_000), now, grace),
            "not gone long enough"
        );
        assert!(
            !due(s(120), Some(now - 59_999), now, grace),
            "written within the grace period"
        );
        assert!(
            !due(s(120), Some(now + 5_000), now, grace),
            "a write stamped ahead of the clock"
        );
    }
}
