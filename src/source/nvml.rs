//! GPU readings straight from the NVIDIA driver through NVML (nvml-wrapper). The library is
//! loaded at run time: on a machine without the driver the source stays down
//! (`llmprobe_source_up{source="nvml"} 0`, one log line from the scrape loop) and retries
//! quietly; nothing panics.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use nvml_wrapper::Nvml;

use super::{GpuFilter, Reading, Source};

pub struct NvmlSource {
    nvml: Option<Arc<Nvml>>,
    filter: GpuFilter,
}

impl NvmlSource {
    pub fn new(filter: GpuFilter) -> Self {
        NvmlSource { nvml: None, filter }
    }

    /// Loads NVML once it can (the scrape loop logs the first failure).
    async fn handle(&mut self) -> Result<Arc<Nvml>, String> {
        if let Some(n) = &self.nvml {
            return Ok(n.clone());
        }
        let loaded = tokio::task::spawn_blocking(Nvml::init).await.map_err(|e| e.to_string())?;
        match loaded {
            Ok(n) => {
                let n = Arc::new(n);
                self.nvml = Some(n.clone());
                Ok(n)
            }
            Err(e) => Err(format!("NVML unavailable (no NVIDIA driver or libnvidia-ml.so.1 on this machine?): {e}")),
        }
    }
}

impl Source for NvmlSource {
    fn scrape(&mut self) -> BoxFuture<'_, Result<Reading, String>> {
        Box::pin(async move {
            let nvml = self.handle().await?;
            let filter = self.filter.clone();
            tokio::task::spawn_blocking(move || read(&nvml, &filter)).await.map_err(|e| e.to_string())?
        })
    }
}

/// Reads every selected device (by index in `gpus`, or `UUID`). Utilization is the mean,
/// memory and power the sums, as for dcgm-exporter.
fn read(nvml: &Nvml, filter: &GpuFilter) -> Result<Reading, String> {
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let (mut util, mut used, mut power, mut n) = (0.0, 0.0, 0.0, 0u32);
    for index in 0..count {
        let device = nvml.device_by_index(index).map_err(|e| e.to_string())?;
        if !filter.gpus.is_empty() && !filter.gpus.contains(&index.to_string()) {
            continue;
        }
        if !filter.uuids.is_empty() && !device.uuid().is_ok_and(|u| filter.uuids.contains(&u)) {
            continue;
        }
        util += f64::from(device.utilization_rates().map_err(|e| e.to_string())?.gpu) / 100.0;
        used += device.memory_info().map_err(|e| e.to_string())?.used as f64;
        power += f64::from(device.power_usage().map_err(|e| e.to_string())?) / 1000.0;
        n += 1;
    }
    if n == 0 {
        return Err(format!("none of the {count} GPUs matched the filter"));
    }
    Ok(Reading { gpu_utilization: Some(util / f64::from(n)), gpu_memory_used_bytes: Some(used), gpu_power_watts: Some(power), ..Reading::default() })
}
