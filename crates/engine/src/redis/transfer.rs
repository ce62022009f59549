//! The Redis transfer area: blobs as chunked keys with a TTL, deduplicated by sha256.
//!
//! Keys (under the backend's prefix): `xfer:<hex>` = `"<size>:<chunks>"`, written last, so its
//! presence means every chunk was written; `xfer:<hex>:<i>` the i-th chunk of
//! [`TransferLimits::chunk_bytes`]; `xfer:rec:<key>` a record (an outputs manifest). Every key
//! has the area's TTL; staging content already present refreshes the TTL of its keys and
//! uploads nothing. A read checks the whole blob's sha256 and refuses a mismatch.

use ::redis::aio::ConnectionManager;

use crate::error::EngineError;
use crate::transfer::{Stored, TransferArea, TransferError, TransferLimits, sha256_hex, verify};

/// The transfer area of a Redis namespace.
#[derive(Clone)]
pub struct RedisTransfer {
    conn: ConnectionManager,
    prefix: String,
    limits: TransferLimits,
}

impl std::fmt::Debug for RedisTransfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTransfer").field("prefix", &self.prefix).field("limits", &self.limits).finish_non_exhaustive()
    }
}

fn backend(what: &str) -> impl FnOnce(::redis::RedisError) -> TransferError + '_ {
    move |e| TransferError::Backend(EngineError::redis(format!("transfer area: {what}: {e}")))
}

impl RedisTransfer {
    /// The area of keys prefixed `prefix` (`{namespace}:`).
    pub fn new(conn: ConnectionManager, prefix: String, limits: TransferLimits) -> Self {
        Self { conn, prefix, limits }
    }

    fn meta_key(&self, digest: &str) -> String {
        format!("{}xfer:{digest}", self.prefix)
    }

    fn chunk_key(&self, digest: &str, i: usize) -> String {
        format!("{}xfer:{digest}:{i}", self.prefix)
    }

    fn ttl_secs(&self) -> u64 {
        self.limits.ttl.as_secs().max(1)
    }

    /// (size, chunks) of a stored blob, `None` when absent.
    async fn meta(&self, digest: &str) -> Result<Option<(u64, usize)>, TransferError> {
        let mut c = self.conn.clone();
        let raw: Option<String> = ::redis::cmd("GET").arg(self.meta_key(digest)).query_async(&mut c).await.map_err(backend("read blob meta"))?;
        Ok(raw.and_then(|r| {
            let (size, chunks) = r.split_once(':')?;
            Some((size.parse().ok()?, chunks.parse().ok()?))
        }))
    }
}

#[async_trait::async_trait]
impl TransferArea for RedisTransfer {
    fn limits(&self) -> TransferLimits {
        self.limits
    }

    async fn put(&self, bytes: &[u8]) -> Result<Stored, TransferError> {
        let size = bytes.len() as u64;
        if size > self.limits.max_bytes {
            return Err(TransferError::TooLarge { what: "a blob".into(), size, cap: self.limits.max_bytes });
        }
        let digest = sha256_hex(bytes);
        let ttl = self.ttl_secs();
        let mut c = self.conn.clone();
        if let Some((_, chunks)) = self.meta(&digest).await? {
            // Deduplicated: refresh the TTL of every key, chunks first. A chunk found expired
            // meanwhile means the blob is incomplete: stage it again below.
            let mut pipe = ::redis::pipe();
            for i in 0..chunks {
                pipe.cmd("EXPIRE").arg(self.chunk_key(&digest, i)).arg(ttl);
            }
            pipe.cmd("EXPIRE").arg(self.meta_key(&digest)).arg(ttl);
            let refreshed: Vec<i64> = pipe.query_async(&mut c).await.map_err(backend("refresh blob TTL"))?;
            if refreshed.iter().all(|r| *r == 1) {
                return Ok(Stored { digest, uploaded: false });
            }
        }
        let chunk = self.limits.chunk_bytes.max(1);
        let pieces: Vec<&[u8]> = if bytes.is_empty() { vec![&[][..]] } else { bytes.chunks(chunk).collect() };
        let mut pipe = ::redis::pipe();
        for (i, piece) in pieces.iter().enumerate() {
            pipe.cmd("SET").arg(self.chunk_key(&digest, i)).arg(*piece).arg("EX").arg(ttl).ignore();
        }
        pipe.cmd("SET").arg(self.meta_key(&digest)).arg(format!("{size}:{}", pieces.len())).arg("EX").arg(ttl).ignore();
        let () = pipe.query_async(&mut c).await.map_err(backend("write blob chunks"))?;
        Ok(Stored { digest, uploaded: true })
    }

    async fn get(&self, digest: &str) -> Result<Vec<u8>, TransferError> {
        let missing = || TransferError::Missing { digest: digest.to_owned(), ttl_secs: self.ttl_secs() };
        let (size, chunks) = self.meta(digest).await?.ok_or_else(missing)?;
        let mut pipe = ::redis::pipe();
        for i in 0..chunks {
            pipe.cmd("GET").arg(self.chunk_key(digest, i));
        }
        let mut c = self.conn.clone();
        let parts: Vec<Option<Vec<u8>>> = pipe.query_async(&mut c).await.map_err(backend("read blob chunks"))?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        for part in parts {
            bytes.extend_from_slice(&part.ok_or_else(missing)?);
        }
        verify(digest, &bytes)?;
        Ok(bytes)
    }

    async fn put_record(&self, key: &str, bytes: &[u8]) -> Result<(), TransferError> {
        let mut c = self.conn.clone();
        let () = ::redis::cmd("SET")
            .arg(format!("{}xfer:rec:{key}", self.prefix))
            .arg(bytes)
            .arg("EX")
            .arg(self.ttl_secs())
            .query_async(&mut c)
            .await
            .map_err(backend("write record"))?;
        Ok(())
    }

    async fn get_record(&self, key: &str) -> Result<Option<Vec<u8>>, TransferError> {
        let mut c = self.conn.clone();
        ::redis::cmd("GET").arg(format!("{}xfer:rec:{key}", self.prefix)).query_async(&mut c).await.map_err(backend("read record"))
    }
}
