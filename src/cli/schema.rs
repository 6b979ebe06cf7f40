//! `ipub schema`: the JSON Schema of the project format, for TOML editors
//! (taplo, Even Better TOML) to complete and validate keys on their own.

use crate::project::schema::json_schema;
use camino::Utf8PathBuf;

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Write the schema to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<Utf8PathBuf>,
}

pub fn run(args: &SchemaArgs) -> anyhow::Result<i32> {
    let mut text = serde_json::to_string_pretty(&json_schema())?;
    text.push('\n');
    match &args.out {
        Some(path) => {
            crate::fsutil::write_atomic(path, text.as_bytes())?;
            super::output::status("schema", format!("wrote {path}"));
        }
        None => super::output::print(format_args!("{text}")),
    }
    Ok(0)
}
