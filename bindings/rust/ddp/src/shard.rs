//! Data set sharding: which items each rank takes, the same in every
//! language (the header's SplitMix64 and Fisher-Yates order).
use std::mem::size_of;

use ddp_sys::{ddp_shard_options, ddp_shard_strategy, ddp_status};

use crate::error::check;
use crate::{Comm, Result};

/// How a rank's items are picked from the (shuffled) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Strategy {
    /// Rank r takes items r, r + world, ... (torch's DistributedSampler).
    #[default]
    Strided,
    /// Rank r takes the r-th contiguous block.
    Contiguous,
}

/// How to shard; the defaults are libddp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardOptions {
    /// Permute by (seed, epoch); default `true`.
    pub shuffle: bool,
    /// Default 0.
    pub seed: u64,
    /// Default 0; change it every epoch.
    pub epoch: u64,
    /// Drop the tail so every rank gets floor(n / world) items (default
    /// `false`: wrap around to ceil(n / world)).
    pub drop_last: bool,
    /// Default [`Strategy::Strided`].
    pub strategy: Strategy,
}

impl Default for ShardOptions {
    fn default() -> Self {
        ShardOptions { shuffle: true, seed: 0, epoch: 0, drop_last: false, strategy: Strategy::Strided }
    }
}

impl ShardOptions {
    fn raw(&self) -> Result<ddp_shard_options> {
        // SAFETY: zeroed is valid; _init fills it.
        let mut opts: ddp_shard_options = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_shard_options_init(&mut opts, size_of::<ddp_shard_options>() as u32) })?;
        opts.shuffle = self.shuffle as i32;
        opts.seed = self.seed;
        opts.epoch = self.epoch;
        opts.drop_last = self.drop_last as i32;
        opts.strategy = match self.strategy {
            Strategy::Strided => ddp_shard_strategy::DDP_SHARD_STRIDED,
            Strategy::Contiguous => ddp_shard_strategy::DDP_SHARD_CONTIGUOUS,
        };
        Ok(opts)
    }
}

/// The number of items every rank gets.
///
/// ```
/// assert_eq!(ddp::shard_count(10, 3, &ddp::ShardOptions::default())?, 4);
/// # Ok::<(), ddp::Error>(())
/// ```
pub fn shard_count(n_items: i64, world: i32, options: &ShardOptions) -> Result<i64> {
    let opts = options.raw()?;
    let mut count = 0;
    check(unsafe { ddp_sys::ddp_shard_count(n_items, world, &opts, &mut count) })?;
    Ok(count)
}

/// The 0-based indices of the items `rank` of `world` owns.
///
/// ```
/// // The header's test vector: 10 items, 3 ranks, seed 42, epoch 0.
/// let opts = ddp::ShardOptions { seed: 42, ..Default::default() };
/// assert_eq!(ddp::shard_indices(10, 1, 3, &opts)?, [9, 6, 2, 0]);
/// # Ok::<(), ddp::Error>(())
/// ```
pub fn shard_indices(n_items: i64, rank: i32, world: i32, options: &ShardOptions) -> Result<Vec<i64>> {
    let opts = options.raw()?;
    let mut indices = vec![0i64; shard_count(n_items, world, options)? as usize];
    let mut count = 0;
    let status = unsafe {
        ddp_sys::ddp_shard_indices(n_items, rank, world, &opts, indices.as_mut_ptr(), indices.len() as i64, &mut count)
    };
    debug_assert_ne!(status, ddp_status::DDP_ERR_BUFFER_TOO_SMALL, "shard_count sized the buffer");
    check(status)?;
    indices.truncate(count as usize);
    Ok(indices)
}

/// A distributed sampler: this rank's item indices for each epoch, like
/// torch's `DistributedSampler`.
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let mut sampler = ddp::Sampler::new(&comm, 100)?.seed(7);
/// for epoch in 0..3 {
///     sampler.set_epoch(epoch);
///     let indices: Vec<usize> = sampler.iter()?.collect();
///     assert_eq!(indices.len(), 100);       // one rank takes everything
/// }
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    n_items: i64,
    rank: i32,
    world: i32,
    options: ShardOptions,
}

impl Sampler {
    /// A sampler of `n_items` for this communicator's rank and size.
    pub fn new(comm: &Comm, n_items: usize) -> Result<Sampler> {
        Ok(Self::for_rank(n_items, comm.rank(), comm.size()))
    }

    /// A sampler for `rank` of `world`, without a communicator.
    pub fn for_rank(n_items: usize, rank: i32, world: i32) -> Sampler {
        Sampler { n_items: n_items as i64, rank, world, options: ShardOptions::default() }
    }

    /// Sets the seed of the shuffle.
    pub fn seed(mut self, seed: u64) -> Self {
        self.options.seed = seed;
        self
    }

    /// Turns shuffling on or off.
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.options.shuffle = shuffle;
        self
    }

    /// Drops the tail instead of wrapping around.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.options.drop_last = drop_last;
        self
    }

    /// Sets the strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.options.strategy = strategy;
        self
    }

    /// Sets the epoch; every epoch has its own order.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.options.epoch = epoch;
    }

    /// The number of items each rank takes per epoch.
    pub fn len(&self) -> Result<usize> {
        Ok(shard_count(self.n_items, self.world, &self.options)? as usize)
    }

    /// Whether an epoch has no items.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// This rank's indices for the current epoch.
    pub fn iter(&self) -> Result<Indices> {
        Ok(Indices(shard_indices(self.n_items, self.rank, self.world, &self.options)?.into_iter()))
    }
}

/// The indices of one rank's items in one epoch, from [`Sampler::iter`].
#[derive(Debug, Clone)]
pub struct Indices(std::vec::IntoIter<i64>);

impl Iterator for Indices {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        self.0.next().map(|index| index as usize)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for Indices {}
