use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = llmprobe::cli::Cli::parse();
    match llmprobe::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
