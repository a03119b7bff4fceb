//! The command line of `pinfold capture`: its arguments and its exit codes
//! (the codes `pinfold capture` returns, and the text `--help` shows).

use std::path::PathBuf;

use super::target::HeaderArg;

/// Exit codes of `pinfold capture`.
pub mod exit {
    /// The draft card was written.
    pub const OK: i32 = 0;
    /// The captures conflict; the conflicts are on stdout, no card.
    pub const CONFLICT: i32 = 1;
    /// Bad arguments or an unreadable `--merge` file.
    pub const USAGE: i32 = 2;
    /// The MCP server could not be reached, started or understood.
    pub const MCP_SERVER: i32 = 3;
    /// The draft is written but does not pass the registry's validation.
    pub const INVALID_DRAFT: i32 = 4;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  the draft card was written
  1  the captures conflict (an inputSchema, outputSchema or prompt's arguments differ):
     the conflicts are printed as JSON on stdout, with both versions; no card is written
  2  bad arguments, or a --merge file that cannot be read
  3  the MCP server could not be reached, started or understood
  4  the server's lists do not make a card the registry accepts: the draft is written
     and the problems are listed on stderr

Progress goes to stderr (a spinner on a terminal); the card to stdout or --out.";

/// `pinfold capture`.
#[derive(Debug, Clone, clap::Args)]
#[command(disable_version_flag = true, after_help = EXIT_CODES)]
pub struct CaptureArgs {
    /// The MCP server's Streamable HTTP endpoint (http:// or https://).
    #[arg(value_name = "URL", required_unless_present_any = ["command", "merge"])]
    pub url: Option<String>,
    /// Words after the URL (`pinfold capture -- npx -y pkg`): never valid,
    /// kept to say that a local server is started with --command.
    #[arg(hide = true, num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub trailing: Vec<String>,
    /// Start a local MCP server and capture it over stdio: "CMD ARGS", split
    /// as a shell would (quotes, no expansion).
    #[arg(long, value_name = "CMD ARGS", conflicts_with = "url")]
    pub command: Option<String>,
    /// A header sent with every request to the server, as "Name: value"
    /// (repeatable). Values are never printed.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<HeaderArg>,
    /// Write the card to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Fold earlier captures into the signature (cards written by `pinfold
    /// capture`, or saved list results), e.g. one per user role.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub merge: Vec<PathBuf>,
    /// Server name of the draft, reverse-DNS "namespace/name" [default: the
    /// server's serverInfo.name when it is one, else derived from it].
    #[arg(long)]
    pub name: Option<String>,
    /// Version of the draft, exact SemVer [default: the server's
    /// serverInfo.version].
    #[arg(long)]
    pub version: Option<String>,
    /// Seconds to wait for the server to connect and for each answer.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// The capabilities the client advertises, which decide what some
    /// servers list: default (roots with listChanged, sampling,
    /// elicitation and the tool-resolution extension, as mainstream clients
    /// advertise), none, or a JSON file holding the capabilities object.
    #[arg(
        long = "client-capabilities",
        value_name = "none|default|FILE.json",
        default_value = "default"
    )]
    pub client_capabilities: String,
}
