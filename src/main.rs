fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(ralph::main_entry())
}
