//! The Redis transfer area: blobs as chunked keys with a TTL, deduplicated by sha256.
//!
//! Keys (under the backend's prefix): `xfer:<hex>` = `"<size>:<chunks>"`, written last, so its
//! presence means every chunk was written; `xfer:<hex>:<i>` the i-th chunk of
//! [`TransferLimits::chunk_bytes`]; `xfer:rec:<key>` a record (an outputs manifest). Every key
//! has the area's TTL; staging content already present checks each chunk in the server (SHA-1,
//! a Lua script) and refreshes the TTL of its keys, uploading nothing, or stages it again when a
//! chunk is missing or corrupted. A read checks the whole blob's sha256 and refuses a mismatch.

use ::redis::aio::ConnectionManager;

use sha1::Digest as _;

use crate::error::EngineError;
use crate::transfer::{Stored, TransferArea, TransferError, TransferLimits, sha256_hex, verify};

/// One chunk's check in the server: 1 and its TTL refreshed when the chunk (KEYS[1]) exists and
/// its SHA-1 is ARGV[1], else 0 and nothing changed. ARGV[2] = TTL, seconds.
const REFRESH_IF_INTACT: &str = r"
local v = redis.call('GET', KEYS[1])
if not v or redis.sha1hex(v) ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
";

/// The transfer area of a Redis namespace.
#[derive(Clone)]
pub struct RedisTransfer {
    conn: ConnectionManager,
    prefix: String,
    limits: TransferLimits,
}

impl std::fmt::Debug for RedisTransfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTransfer")
            .field("prefix", &self.prefix)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn backend(what: &str) -> impl FnOnce(::redis::RedisError) -> TransferError + '_ {
    move |e| TransferError::Backend(EngineError::redis(format!("transfer area: {what}: {e}")))
}

impl RedisTransfer {
    /// The area of keys prefixed `prefix` (`{namespace}:`).
    pub fn new(conn: ConnectionManager, prefix: String, limits: TransferLimits) -> Self {
        Self {
            conn,
            prefix,
            limits,
        }
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
        let raw: Option<String> = ::redis::cmd("GET")
            .arg(self.meta_key(digest))
            .query_async(&mut c)
            .await
            .map_err(backend("read blob meta"))?;
        Ok(raw.and_then(|r| {
            let (size, chunks) = r.split_once(':')?;
            Some((size.parse().ok()?, chunks.parse().ok()?))
        }))
    }

    /// Deduplication of content already present: checks in Redis that every chunk still holds
    /// the bytes of `pieces` (its SHA-1, computed by the server, against the piece's: no chunk
    /// crosses the wire) and refreshes the TTL of each, then of the meta key. False when a chunk
    /// is missing or does not verify (corrupted, or written by another chunk size): the caller
    /// stages the content again, replacing every chunk, so a corrupted chunk is refused only
    /// until the next submit of the same content.
    async fn refresh_verified(
        &self,
        digest: &str,
        pieces: &[&[u8]],
    ) -> Result<bool, TransferError> {
        let script = ::redis::Script::new(REFRESH_IF_INTACT);
        let ttl = self.ttl_secs();
        let mut c = self.conn.clone();
        let mut pipe = ::redis::pipe();
        pipe.load_script(&script).ignore();
        for (i, piece) in pieces.iter().enumerate() {
            let mut check = script.key(self.chunk_key(digest, i));
            check.arg(hex::encode(sha1::Sha1::digest(piece))).arg(ttl);
            pipe.invoke_script(&check);
        }
        let intact: Vec<i64> = pipe
            .query_async(&mut c)
            .await
            .map_err(backend("check blob chunks"))?;
        if !intact.iter().all(|r| *r == 1) {
            return Ok(false);
        }
        let refreshed: i64 = ::redis::cmd("EXPIRE")
            .arg(self.meta_key(digest))
            .arg(ttl)
            .query_async(&mut c)
            .await
            .map_err(backend("refresh blob TTL"))?;
        Ok(refreshed == 1)
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
            return Err(TransferError::TooLarge {
                what: "a blob".into(),
                size,
                cap: self.limits.max_bytes,
            });
        }
        let digest = sha256_hex(bytes);
        let ttl = self.ttl_secs();
        let chunk = self.limits.chunk_bytes.max(1);
        let pieces: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[][..]]
        } else {
            bytes.chunks(chunk).collect()
        };
        if let Some((_, chunks)) = self.meta(&digest).await?
            && chunks == pieces.len()
            && self.refresh_verified(&digest, &pieces).await?
        {
            return Ok(Stored {
                digest,
                uploaded: false,
            });
        }
        let mut c = self.conn.clone();
        let mut pipe = ::redis::pipe();
        for (i, piece) in pieces.iter().enumerate() {
            pipe.cmd("SET")
                .arg(self.chunk_key(&digest, i))
                .arg(*piece)
                .arg("EX")
                .arg(ttl)
                .ignore();
        }
        pipe.cmd("SET")
            .arg(self.meta_key(&digest))
            .arg(format!("{size}:{}", pieces.len()))
            .arg("EX")
            .arg(ttl)
            .ignore();
        let () = pipe
            .query_async(&mut c)
            .await
            .map_err(backend("write blob chunks"))?;
        Ok(Stored {
            digest,
            uploaded: true,
        })
    }

    async fn get(&self, digest: &str) -> Result<Vec<u8>, TransferError> {
        let missing = || TransferError::Missing {
            digest: digest.to_owned(),
        };
        let (size, chunks) = self.meta(digest).await?.ok_or_else(missing)?;
        let mut pipe = ::redis::pipe();
        for i in 0..chunks {
            pipe.cmd("GET").arg(self.chunk_key(digest, i));
        }
        let mut c = self.conn.clone();
        let parts: Vec<Option<Vec<u8>>> = pipe
            .query_async(&mut c)
            .await
            .map_err(backend("read blob chunks"))?;
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
        ::redis::cmd("GET")
            .arg(format!("{}xfer:rec:{key}", self.prefix))
            .query_async(&mut c)
            .await
            .map_err(backend("read record"))
    }

    async fn remove_record(&self, key: &str) -> Result<(), TransferError> {
        let mut c = self.conn.clone();
        let _: i64 = ::redis::cmd("DEL")
            .arg(format!("{}xfer:rec:{key}", self.prefix))
            .query_async(&mut c)
            .await
            .map_err(backend("remove record"))?;
        Ok(())
    }
}
