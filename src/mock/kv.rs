//! Paged KV-cache block pool with a hash-addressed prefix cache (vLLM's design, simplified).
//!
//! Freed blocks keep their hash and stay findable until reused: the free list is LRU, so the
//! oldest freed block is evicted first.

use std::collections::{HashMap, VecDeque};

pub struct KvPool {
    refcnt: Vec<u32>,
    hash: Vec<Option<u64>>,
    /// Lazily cleaned: an entry is live only while `in_free[b]`.
    free: VecDeque<u32>,
    in_free: Vec<bool>,
    nfree: usize,
    cached: HashMap<u64, u32>,
}

impl KvPool {
    pub fn new(blocks: u32) -> Self {
        let n = blocks as usize;
        KvPool { refcnt: vec![0; n], hash: vec![None; n], free: (0..blocks).collect(), in_free: vec![true; n], nfree: n, cached: HashMap::new() }
    }

    pub fn total(&self) -> usize {
        self.refcnt.len()
    }

    pub fn free_count(&self) -> usize {
        self.nfree
    }

    pub fn used(&self) -> usize {
        self.total() - self.nfree
    }

    /// Takes a fresh block, evicting the oldest cached free block's hash.
    pub fn alloc(&mut self) -> Option<u32> {
        while let Some(b) = self.free.pop_front() {
            let bi = b as usize;
            if !self.in_free[bi] {
                continue; // stale entry: re-acquired through the prefix cache
            }
            self.in_free[bi] = false;
            self.nfree -= 1;
            if let Some(h) = self.hash[bi].take()
                && self.cached.get(&h) == Some(&b)
            {
                self.cached.remove(&h);
            }
            self.refcnt[bi] = 1;
            return Some(b);
        }
        None
    }

    /// Shares the cached block with hash `h`, if any.
    pub fn acquire_cached(&mut self, h: u64) -> Option<u32> {
        let b = *self.cached.get(&h)?;
        let bi = b as usize;
        if self.refcnt[bi] == 0 {
            self.in_free[bi] = false;
            self.nfree -= 1;
        }
        self.refcnt[bi] += 1;
        Some(b)
    }

    /// Holders of block `b`.
    pub fn refs(&self, b: u32) -> u32 {
        self.refcnt[b as usize]
    }

    /// Whether a block with hash `h` is cached (without taking it).
    #[cfg(test)]
    pub fn is_cached(&self, h: u64) -> bool {
        self.cached.contains_key(&h)
    }

    /// Makes a full block findable by its content hash.
    pub fn register(&mut self, b: u32, h: u64) {
        self.hash[b as usize] = Some(h);
        self.cached.entry(h).or_insert(b);
    }

    pub fn release(&mut self, b: u32) {
        let bi = b as usize;
        self.refcnt[bi] -= 1;
        if self.refcnt[bi] == 0 {
            self.in_free[bi] = true;
            self.nfree += 1;
            self.free.push_back(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_blocks_stay_cached_until_evicted() {
        let mut p = KvPool::new(2);
        let a = p.alloc().unwrap();
        p.register(a, 42);
        p.release(a);
        assert_eq!(p.free_count(), 2);
        assert_eq!(p.acquire_cached(42), Some(a));
        assert_eq!(p.free_count(), 1);
        p.release(a);
        p.alloc().unwrap();
        p.alloc().unwrap();
        assert!(!p.is_cached(42));
        assert!(p.alloc().is_none());
    }
}
