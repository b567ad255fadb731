//! The Prometheus exporter (feature `prometheus`): `metrics-exporter-prometheus`'s recorder, without
//! its HTTP listener, and the handle that renders it.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

use super::{DESCRIPTIONS, describe, names, sample, track_connector_age};
use crate::{Error, Result};

/// Buckets of the duration histograms, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// `metrics-exporter-prometheus`'s recorder with this crate's histogram buckets, and the handle
/// that renders it.
pub(super) fn recorder() -> (PrometheusRecorder, PrometheusHandle) {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(names::COMMIT_DURATION.into()),
            DURATION_BUCKETS,
        )
        .expect("DURATION_BUCKETS is not empty")
        .build_recorder();
    let handle = PrometheusHandle {
        inner: recorder.handle(),
    };
    (recorder, handle)
}

/// Renders what the installed recorder holds, after a [`sample`].
#[derive(Debug, Clone)]
pub struct PrometheusHandle {
    inner: metrics_exporter_prometheus::PrometheusHandle,
}

impl PrometheusHandle {
    /// The Prometheus text format (version 0.0.4) of every series, after a [`sample`].
    pub fn render(&self) -> String {
        sample();
        self.render_sampled()
    }

    /// The exporter's text, followed by the HELP and TYPE lines of this crate's metrics that have no
    /// series yet (the exporter writes a family only once it has one), so a scraper sees the full
    /// list from the start.
    pub(super) fn render_sampled(&self) -> String {
        let mut out = self.inner.render();
        let present: std::collections::BTreeSet<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let missing: Vec<_> = DESCRIPTIONS
            .iter()
            .filter(|(name, ..)| !present.contains(name))
            .collect();
        for (name, kind, _, help) in missing {
            let help = help.replace('\\', "\\\\").replace('\n', "\\n");
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {}\n\n",
                kind.as_str()
            ));
        }
        out
    }
}

/// Installs `metrics-exporter-prometheus`'s recorder as the global `metrics` recorder (once per
/// process; later calls return the same handle), describes every metric, turns per-connector age
/// tracking on and starts a thread that folds recorded histogram samples into their buckets every
/// 5 s (the exporter keeps samples until then, or until the next render).
/// Fails when another recorder is already installed.
pub fn install() -> Result<PrometheusHandle> {
    static HANDLE: OnceLock<std::result::Result<PrometheusHandle, String>> = OnceLock::new();
    let result = HANDLE.get_or_init(|| {
        let (recorder, handle) = recorder();
        ::metrics::set_global_recorder(recorder)
            .map_err(|e| format!("cannot install the Prometheus recorder: {e}"))?;
        describe();
        track_connector_age(true);
        let upkeep = handle.inner.clone();
        std::thread::Builder::new()
            .name("offsets-metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(5));
                    upkeep.run_upkeep();
                }
            })
            .map_err(|e| format!("cannot start the metrics upkeep thread: {e}"))?;
        Ok(handle)
    });
    result.clone().map_err(Error::State)
}
