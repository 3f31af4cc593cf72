//! Compiles `proto/` with protox (a pure-Rust protobuf compiler, so no system `protoc`) into prost/tonic code,
//! and writes the encoded descriptor set, `google.api.http` options and comments kept, which the REST edge,
//! gRPC reflection and the OpenAPI generator read at run time.

use std::{env, fs, path::PathBuf};

use prost::Message;

fn proto_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            proto_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut files = Vec::new();
    proto_files(std::path::Path::new("proto/frontdesk"), &mut files)?;
    files.sort();

    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(&files)?;
    // The encoded form keeps custom options such as google.api.http, which prost_types would drop.
    let encoded = compiler.encode_file_descriptor_set();
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out_dir.join("frontdesk_descriptor.bin"), &encoded)?;
    let descriptors = tonic_prost_build::FileDescriptorSet::decode(encoded.as_slice())?;

    tonic_prost_build::configure()
        // tonic_prost's codec, except that a request that does not decode is INVALID_ARGUMENT (src/codec.rs).
        .codec_path("crate::codec::ProtoCodec")
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
