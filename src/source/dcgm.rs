//! dcgm-exporter pages -> the GPU fields of a `Reading`, for the GPUs the filters select
//! (by `gpu` index, `UUID`, Kubernetes `pod`/`namespace`). Several GPUs are combined:
//! utilization is their mean, memory and power their sums.

pub use crate::config::GpuFilter;

use super::promtext::{Page, SampleLine};
use super::reading::Reading;

impl GpuFilter {
    pub fn selects(&self, s: &SampleLine) -> bool {
        let any = |list: &[String], label: &str| list.is_empty() || s.label(label).is_some_and(|v| list.iter().any(|x| x == v));
        any(&self.gpus, "gpu")
            && any(&self.uuids, "UUID")
            && any(&self.pods, "pod")
            && self.namespace.as_deref().is_none_or(|ns| s.label("namespace") == Some(ns))
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Reads utilization (`DCGM_FI_DEV_GPU_UTIL`, %), memory used (`DCGM_FI_DEV_FB_USED`, MiB) and
/// power (`DCGM_FI_DEV_POWER_USAGE`, W) of the selected GPUs.
pub fn read(page: &Page, filter: &GpuFilter) -> Reading {
    let values = |name: &str| -> Vec<f64> { page.all(name).filter(|s| filter.selects(s)).map(|s| s.value).filter(|v| v.is_finite()).collect() };
    let util = values("DCGM_FI_DEV_GPU_UTIL");
    let used = values("DCGM_FI_DEV_FB_USED");
    let power = values("DCGM_FI_DEV_POWER_USAGE");
    Reading {
        gpu_utilization: (!util.is_empty()).then(|| util.iter().sum::<f64>() / util.len() as f64 / 100.0),
        gpu_memory_used_bytes: (!used.is_empty()).then(|| used.iter().sum::<f64>() * MIB),
        gpu_power_watts: (!power.is_empty()).then(|| power.iter().sum()),
        ..Reading::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::promtext::parse;

    const PAGE: &str = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",pod=\"p1\",namespace=\"ml\"} 50\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\",pod=\"p2\",namespace=\"ml\"} 100\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",pod=\"p1\",namespace=\"ml\"} 1024\n\
        DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\",pod=\"p2\",namespace=\"ml\"} 2048\n\
        DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",pod=\"p1\",namespace=\"ml\"} 9223372036854775794\n\
        DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",pod=\"p2\",namespace=\"ml\"} 300.5\n";

    #[test]
    fn all_gpus_combined() {
        let r = read(&parse(PAGE), &GpuFilter::default());
        assert_eq!(r.gpu_utilization, Some(0.75));
        assert_eq!(r.gpu_memory_used_bytes, Some(3072.0 * MIB));
        // GPU 0's power is the blank sentinel: only GPU 1 counts.
        assert_eq!(r.gpu_power_watts, Some(300.5));
    }

    #[test]
    fn filters_by_pod_gpu_and_namespace() {
        let page = parse(PAGE);
        let by_pod = read(&page, &GpuFilter { pods: vec!["p1".into()], ..GpuFilter::default() });
        assert_eq!(by_pod.gpu_utilization, Some(0.5));
        assert_eq!(by_pod.gpu_power_watts, None);
        let by_gpu = read(&page, &GpuFilter { gpus: vec!["1".into()], namespace: Some("ml".into()), ..GpuFilter::default() });
        assert_eq!(by_gpu.gpu_memory_used_bytes, Some(2048.0 * MIB));
        let none = read(&page, &GpuFilter { namespace: Some("other".into()), ..GpuFilter::default() });
        assert_eq!(none.gpu_utilization, None);
    }
}
