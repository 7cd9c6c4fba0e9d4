mod claude_stub;
mod real_claude;
