# Runs a command on a pseudo-terminal, as a person at a terminal would: waits until the command has
# printed PROMPT, then types INPUT (hex), and prints everything the terminal showed. Exits with the
# command's exit code; says "prompted" on stderr once it has typed. Usage: python3 terminal.py PROMPT INPUT_HEX COMMAND [ARGS...]
# TERMINAL_COLUMNS sets the terminal's width (default: none, 0), TERMINAL_SECONDS how long it may run (20).
import fcntl, os, pty, select, struct, sys, termios, time

prompt, typed, command = sys.argv[1].encode(), bytes.fromhex(sys.argv[2]), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    if os.environ.get("TERMINAL_COLUMNS"):  # set on the child's own side, before it can ask
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, int(os.environ["TERMINAL_COLUMNS"]), 0, 0))
    os.execvp(command[0], command)
shown, sent, deadline = b"", False, time.time() + float(os.environ.get("TERMINAL_SECONDS", "20"))
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.05)
    if ready:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the command ended
            break
        if not chunk:
            break
        shown += chunk
    if not sent and prompt in shown:
        os.write(fd, typed)
        sent = True
        sys.stderr.write("prompted\n")  # the caller may act once the command is at its prompt
        sys.stderr.flush()
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(shown)
sys.exit(os.waitstatus_to_exitcode(status))
