//! The JNI symbols of `connectoffsets.jni.NativeStore`: each forwards to [`store`],
//! which does the work (and catches every panic there).

mod store;

use jni::JNIEnv;
use jni::objects::{JClass, JObjectArray, JString};
use jni::sys::{jlong, jobjectArray, jstring};
use store as native;

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_version<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
) -> jstring {
    native::version(&mut env)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_open<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    url: JString<'l>,
    log_dir: JString<'l>,
    names: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    native::open(&mut env, url, log_dir, names, values)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_get<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    handle: jlong,
    keys: JObjectArray<'l>,
) -> jobjectArray {
    native::get(&mut env, handle, keys)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_set<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    handle: jlong,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    native::set(&mut env, handle, keys, values)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_partitions<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    handle: jlong,
    connector: JString<'l>,
) -> jobjectArray {
    native::partitions(&mut env, handle, connector)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_connectoffsets_jni_NativeStore_close<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    handle: jlong,
) {
    native::close(&mut env, handle)
}
