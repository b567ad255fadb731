//! The native side of the Java `OffsetBackingStore` (`java/store`): what the `java/native` cdylib
//! exports, one function per native method of `connectoffsets.jni.NativeStore`.
//!
//! Keys and values cross as the bytes Kafka Connect's `JsonConverter` wrote. An open store is a
//! [`CommitBuffer`] over a store from [`open`](crate::open()), named to Java by a handle: a number
//! looked up in a registry, never a pointer, so a handle used after `close` (or twice closed) is an
//! error, not a crash. Every entry point catches panics and turns errors into a Java
//! `ConnectException` carrying the crate's message.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use jni::JNIEnv;
use jni::objects::{JByteArray, JObject, JObjectArray, JString};
use jni::sys::{jlong, jobjectArray, jstring};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::codec;
use connect_offsets::{Error, OffsetKey, Result};

/// The exception every failure becomes: Connect's own, which its callers expect.
const CONNECT_EXCEPTION: &str = "org/apache/kafka/connect/errors/ConnectException";

/// One open store.
struct Native {
    buffer: CommitBuffer,
    durability: Durability,
    max_pending: usize,
    /// Held from a `set`'s first offer until its batch is durable, so each `set` is one batch.
    sets: Mutex<()>,
}

static NEXT_HANDLE: AtomicI64 = AtomicI64::new(1);

fn registry() -> MutexGuard<'static, HashMap<i64, Arc<Native>>> {
    static STORES: LazyLock<Mutex<HashMap<i64, Arc<Native>>>> = LazyLock::new(Default::default);
    STORES.lock().unwrap_or_else(|p| p.into_inner())
}

fn native(handle: jlong) -> Result<Arc<Native>> {
    registry()
        .get(&handle)
        .cloned()
        .ok_or(Error::Closed("offset store (stopped, or never started)"))
}

/// Runs `f`, turning an error or a panic into a pending Java exception and `fallback`.
fn guarded<'l, T>(
    env: &mut JNIEnv<'l>,
    fallback: T,
    f: impl FnOnce(&mut JNIEnv<'l>) -> Result<T>,
) -> T {
    let outcome = catch_unwind(AssertUnwindSafe(|| f(env)));
    let message = match outcome {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e.to_string(),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            format!("connect-offsets panicked: {what}")
        }
    };
    // A failed JNI call may already have left its own exception pending: keep that one.
    if !env.exception_check().unwrap_or(false) {
        let _ = env.throw_new(CONNECT_EXCEPTION, message);
    }
    fallback
}

fn jni_error(what: &str, e: jni::errors::Error) -> Error {
    Error::Input(format!("{what}: {e}"))
}

fn string(env: &mut JNIEnv, s: &JString, what: &str) -> Result<String> {
    if s.is_null() {
        return Err(Error::Input(format!("{what} is null")));
    }
    Ok(env.get_string(s).map_err(|e| jni_error(what, e))?.into())
}

/// The elements of a `byte[][]`, `None` for a null element.
fn byte_arrays(env: &mut JNIEnv, array: &JObjectArray, what: &str) -> Result<Vec<Option<Vec<u8>>>> {
    if array.is_null() {
        return Err(Error::Input(format!("{what} is null")));
    }
    let n = env
        .get_array_length(array)
        .map_err(|e| jni_error(what, e))?;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let element = env
            .get_object_array_element(array, i)
            .map_err(|e| jni_error(what, e))?;
        if element.is_null() {
            out.push(None);
            continue;
        }
        let bytes = JByteArray::from(element);
        out.push(Some(
            env.convert_byte_array(&bytes)
                .map_err(|e| jni_error(what, e))?,
        ));
        // Big maps would fill the JVM's local reference table otherwise.
        let _ = env.delete_local_ref(bytes);
    }
    Ok(out)
}

/// A `byte[][]` of `items`, a null element for `None`.
fn to_byte_arrays<'l>(env: &mut JNIEnv<'l>, items: &[Option<Vec<u8>>]) -> Result<JObjectArray<'l>> {
    let what = "result array";
    let array = env
        .new_object_array(items.len() as i32, "[B", JObject::null())
        .map_err(|e| jni_error(what, e))?;
    for (i, item) in items.iter().enumerate() {
        if let Some(bytes) = item {
            let element = env
                .byte_array_from_slice(bytes)
                .map_err(|e| jni_error(what, e))?;
            env.set_object_array_element(&array, i as i32, &element)
                .map_err(|e| jni_error(what, e))?;
            let _ = env.delete_local_ref(element);
        }
    }
    Ok(array)
}

fn key(bytes: &[u8]) -> Result<OffsetKey> {
    codec::decode_key(bytes).map_err(|e| {
        Error::Input(format!(
            "offset key `{}`: {e}",
            String::from_utf8_lossy(bytes)
        ))
    })
}

/// The crate's version: the jar refuses a library of another one.
pub fn version<'l>(env: &mut JNIEnv<'l>) -> jstring {
    guarded(env, std::ptr::null_mut(), |env| {
        env.new_string(env!("CARGO_PKG_VERSION"))
            .map(JString::into_raw)
            .map_err(|e| jni_error("version", e))
    })
}

/// Opens the store at `url` behind a commit buffer logging to `log_dir`; `names`/`values` are
/// [`CommitBufferConfig::set`] properties. Returns the handle.
pub fn open<'l>(
    env: &mut JNIEnv<'l>,
    url: JString<'l>,
    log_dir: JString<'l>,
    names: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    guarded(env, 0, |env| {
        let url = string(env, &url, "offset.storage.connect-offsets.url")?;
        let log_dir = string(env, &log_dir, "offset.storage.connect-offsets.log.dir")?;
        let names = byte_arrays(env, &names, "property names")?;
        let values = byte_arrays(env, &values, "property values")?;
        let mut config = CommitBufferConfig::new(&log_dir);
        for (name, value) in names.iter().zip(&values) {
            let text = |b: &Option<Vec<u8>>| {
                String::from_utf8_lossy(b.as_deref().unwrap_or_default()).into_owned()
            };
            let (name, value) = (text(name), text(value));
            if name == "offset.flush.interval.ms" {
                return Err(Error::Settings(format!(
                    "property `{name}`: the engine's own offset.flush.interval.ms decides when offsets are committed; every set() is one commit"
                )));
            }
            config
                .set(&name, &value)
                .map_err(|e| e.context(format!("offset.storage.connect-offsets.{name}")))?;
        }
        // Commits happen at set() only: an interval seal could split a set() into two batches.
        config.flush_interval = None;
        let shown = connect_offsets::internal::store::url::redact(&url);
        let store = connect_offsets::open_for_writer(&url, &config.writer)
            .map_err(|e| e.context(format!("opening `{shown}`")))?;
        let durability = config.durability;
        let max_pending = config.max_pending;
        let buffer = CommitBuffer::open(Arc::from(store), config)
            .map_err(|e| e.context(format!("opening the commit log in `{log_dir}`")))?;
        let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        let native = Native {
            buffer,
            durability,
            max_pending,
            sets: Mutex::new(()),
        };
        registry().insert(handle, Arc::new(native));
        Ok(handle)
    })
}

/// The committed value of each key (`null` where there is none), as Connect's bytes.
pub fn get<'l>(env: &mut JNIEnv<'l>, handle: jlong, keys: JObjectArray<'l>) -> jobjectArray {
    guarded(env, std::ptr::null_mut(), |env| {
        let native = native(handle)?;
        let keys = byte_arrays(env, &keys, "keys")?;
        let mut values = Vec::with_capacity(keys.len());
        for k in &keys {
            let Some(k) = k else {
                values.push(None);
                continue;
            };
            let value = native.buffer.get(&key(k)?)?.map(|offset| {
                let mut out = Vec::new();
                codec::encode_value(&offset, &mut out);
                out
            });
            values.push(value);
        }
        to_byte_arrays(env, &values).map(JObjectArray::into_raw)
    })
}

/// Commits `keys[i] = values[i]` (a null value resets the key) as one batch and returns its seq
/// once it is durable at the configured durability.
pub fn set<'l>(
    env: &mut JNIEnv<'l>,
    handle: jlong,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    guarded(env, 0, |env| {
        let native = native(handle)?;
        let keys = byte_arrays(env, &keys, "keys")?;
        let values = byte_arrays(env, &values, "values")?;
        if keys.len() != values.len() {
            return Err(Error::Input(format!(
                "{} keys but {} values",
                keys.len(),
                values.len()
            )));
        }
        if keys.len() > native.max_pending {
            return Err(Error::Input(format!(
                "a set() of {} offsets is more than offsets.max.pending ({}): it would not commit as one batch",
                keys.len(),
                native.max_pending
            )));
        }
        // Decoded and admitted by the store before anything is offered: a bad entry refuses the
        // whole set (an offer left pending would be committed by the next set).
        let mut entries = Vec::with_capacity(keys.len());
        for (k, v) in keys.iter().zip(&values) {
            let k = k
                .as_deref()
                .ok_or_else(|| Error::Input("a null offset key".into()))?;
            let offset = match v {
                None => None,
                Some(v) => codec::decode_value(v).map_err(|e| {
                    Error::Input(format!(
                        "offset value `{}` of key `{}`: {e}",
                        String::from_utf8_lossy(v),
                        String::from_utf8_lossy(k)
                    ))
                })?,
            };
            let k = key(k)?;
            native.buffer.admit(&k, offset.as_ref())?;
            entries.push((k, offset));
        }
        let seq = {
            let _one_batch = native.sets.lock().unwrap_or_else(|p| p.into_inner());
            for (k, offset) in entries {
                match offset {
                    Some(o) => native.buffer.offer(k, o)?,
                    None => native.buffer.offer_reset(k)?,
                }
            }
            // Waited for under the lock: released earlier, the next set's offers could join
            // this batch's seal halfway.
            native.buffer.commit_with(native.durability).wait()?
        };
        Ok(seq as jlong)
    })
}

/// The key bytes of every partition connector `connector` has an offset for.
pub fn partitions<'l>(env: &mut JNIEnv<'l>, handle: jlong, connector: JString<'l>) -> jobjectArray {
    guarded(env, std::ptr::null_mut(), |env| {
        let native = native(handle)?;
        let connector = string(env, &connector, "connector name")?;
        let keys: Vec<Option<Vec<u8>>> = native
            .buffer
            .partitions(&connector)?
            .into_iter()
            .map(|(k, _)| Some(k.connect_key()))
            .collect();
        to_byte_arrays(env, &keys).map(JObjectArray::into_raw)
    })
}

/// Closes the store (the log is synced and the store persisted). Closing an unknown handle is a
/// no-op: the jar closes once, and a second close must not fail.
pub fn close<'l>(env: &mut JNIEnv<'l>, handle: jlong) {
    guarded(env, (), |_| {
        let Some(native) = registry().remove(&handle) else {
            return Ok(());
        };
        // Calls still running hold their own reference; the buffer closes now all the same.
        native.buffer.close()
    })
}
