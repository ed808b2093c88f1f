//! Named hardware profiles: the cost model and capacity of the simulated engine.
//!
//! The numbers are illustrative, chosen to give the known curve shapes at a realistic scale;
//! they are not measurements of any real GPU.

/// Cost model and capacity of one simulated engine instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// Fixed cost of every step (kernel launches, sampling), microseconds.
    pub step_base_us: f64,
    /// Cost per prefill token scheduled in a step, microseconds.
    pub prefill_us_per_token: f64,
    /// Cost per decoding sequence in a step, microseconds.
    pub decode_us_per_seq: f64,
    /// KV-cache capacity in blocks of `block_size` tokens.
    pub kv_blocks: u32,
    pub block_size: u32,
    /// Token budget per step (vLLM `max_num_batched_tokens`).
    pub max_batched_tokens: u32,
    /// Most sequences running at once (vLLM `max_num_seqs`).
    pub max_num_seqs: u32,
    pub max_model_len: u32,
    /// Mean natural output length (tokens) before EOS when `ignore_eos` is off.
    pub eos_mean_tokens: f64,
    /// What the fake DCGM page reports.
    pub gpu_name: &'static str,
    pub fb_total_mib: u64,
    pub idle_watts: f64,
    pub max_watts: f64,
}

impl Profile {
    /// Looks a profile up by name.
    pub fn by_name(name: &str) -> Option<Profile> {
        Self::all().into_iter().find(|p| p.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        Self::all().iter().map(|p| p.name).collect()
    }

    fn all() -> Vec<Profile> {
        vec![Self::small_gpu(), Self::large_gpu(), Self::cpu_tiny(), Self::load_test()]
    }

    /// A 24 GB class card serving a ~8B model.
    pub fn small_gpu() -> Profile {
        Profile {
            name: "small-gpu",
            step_base_us: 12_000.0,
            prefill_us_per_token: 60.0,
            decode_us_per_seq: 250.0,
            kv_blocks: 2048,
            block_size: 16,
            max_batched_tokens: 2048,
            max_num_seqs: 128,
            max_model_len: 4096,
            eos_mean_tokens: 160.0,
            gpu_name: "NVIDIA L4",
            fb_total_mib: 23034,
            idle_watts: 18.0,
            max_watts: 72.0,
        }
    }

    /// An 80 GB class card serving the same model.
    pub fn large_gpu() -> Profile {
        Profile {
            name: "large-gpu",
            step_base_us: 6_000.0,
            prefill_us_per_token: 12.0,
            decode_us_per_seq: 60.0,
            kv_blocks: 16384,
            block_size: 16,
            max_batched_tokens: 8192,
            max_num_seqs: 256,
            max_model_len: 8192,
            eos_mean_tokens: 160.0,
            gpu_name: "NVIDIA H100 80GB HBM3",
            fb_total_mib: 81559,
            idle_watts: 70.0,
            max_watts: 700.0,
        }
    }

    /// A small CPU deployment: few slots, slow prefill.
    pub fn cpu_tiny() -> Profile {
        Profile {
            name: "cpu-tiny",
            step_base_us: 20_000.0,
            prefill_us_per_token: 400.0,
            decode_us_per_seq: 2_000.0,
            kv_blocks: 512,
            block_size: 16,
            max_batched_tokens: 512,
            max_num_seqs: 8,
            max_model_len: 2048,
            eos_mean_tokens: 96.0,
            gpu_name: "NVIDIA T4",
            fb_total_mib: 15360,
            idle_watts: 10.0,
            max_watts: 70.0,
        }
    }

    /// Huge capacity, near-free compute: for load-testing the HTTP path itself.
    pub fn load_test() -> Profile {
        Profile {
            name: "load-test",
            step_base_us: 20_000.0,
            prefill_us_per_token: 0.1,
            decode_us_per_seq: 0.1,
            kv_blocks: 1 << 20,
            block_size: 16,
            max_batched_tokens: 1 << 20,
            max_num_seqs: 1 << 16,
            max_model_len: 8192,
            eos_mean_tokens: 256.0,
            gpu_name: "NVIDIA H200",
            fb_total_mib: 143771,
            idle_watts: 80.0,
            max_watts: 700.0,
        }
    }

    /// Wall time of one step, nanoseconds.
    /// The same profile with every step `factor` times as long (a factor that is not a positive
    /// number leaves it unchanged).
    pub fn slowed(&self, factor: f64) -> Profile {
        let f = if factor.is_finite() && factor > 0.0 { factor } else { 1.0 };
        Profile {
            step_base_us: self.step_base_us * f,
            prefill_us_per_token: self.prefill_us_per_token * f,
            decode_us_per_seq: self.decode_us_per_seq * f,
            ..self.clone()
        }
    }

    pub fn step_ns(&self, prefill_tokens: u32, decode_seqs: u32) -> u64 {
        let us = self.step_base_us + self.prefill_us_per_token * f64::from(prefill_tokens) + self.decode_us_per_seq * f64::from(decode_seqs);
        (us * 1000.0) as u64
    }
}

impl Default for Profile {
    fn default() -> Self {
        Self::small_gpu()
    }
}
