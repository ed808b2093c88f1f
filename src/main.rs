use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = llmprobe::cli::Cli::parse();
    match llmprobe::run(cli) {
        Ok(code) => code,
        Err(err) => {
            // The chain may quote a server (an answer, a model id): no raw control characters.
            eprintln!("error: {}", llmprobe::util::logsafe::escape_control(&format!("{err:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}
