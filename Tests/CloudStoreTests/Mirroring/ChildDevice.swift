import Foundation

/// A device in a child process (`CloudStoreTestHelper device`) that a test kills with SIGKILL at a
/// chosen moment, and what it said it changed.
struct ChildDevice {
    /// A change the child announced ("intent") or committed ("commit").
    struct Change: Equatable {
        enum Kind: String { case insert, update, delete, nothing }
        var isCommitted: Bool
        var kind: Kind
        var id: UUID
        /// The new title (nil for a delete).
        var title: String?
        /// The title an update overwrote, or a committed delete removed.
        var previous: String?

        /// Parses `intent|commit insert|update|delete|nothing <id> <title|-> [previous]`.
        init?(_ line: String) {
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count >= 4, parts[0] == "intent" || parts[0] == "commit", let kind = Kind(rawValue: parts[1]),
                let id = UUID(uuidString: parts[2])
            else { return nil }
            isCommitted = parts[0] == "commit"
            self.kind = kind
            self.id = id
            title = kind == .delete || kind == .nothing ? nil : parts[3]
            previous = parts.count > 4 ? parts[4] : nil
        }
    }

    /// When to kill the child.
    enum Kill {
        /// A moment `delay` after its `n`-th "sync" line, while it exports or imports.
        case duringSync(Int, delay: Duration)
        /// Right after its `n`-th line.
        case afterLine(Int)
        /// Never: it runs to the end.
        case never
    }

    /// Everything the child printed, and whether the kill landed while it was syncing.
    struct Run {
        var output: [String]
        var wasKilled: Bool
        var killedWhileSyncing: Bool

        /// Committed changes, in order.
        var committed: [Change] { output.compactMap(Change.init).filter(\.isCommitted) }

        /// The last change announced and not confirmed: the kill may have landed before or after its commit.
        var inFlight: Change? {
            var last: Change?
            for change in output.compactMap(Change.init) { last = change.isCommitted ? nil : change }
            return last
        }
    }

    /// Runs `CloudStoreTestHelper device …` until it ends or `kill` says.
    static func run(
        store: URL, schema: URL = RepositoryPaths.notesSchema, server: URL, container: String, token: String = "alice-token",
        steps: Int, seed: UInt64, drain: Bool = false, kill: Kill
    ) async throws -> Run {
        var arguments = [
            "device", store.path, schema.path, "\(steps)", server.absoluteString, container, token,
            "\(seed)",
        ]
        if drain { arguments.append("drain") }
        let (child, lines) = try TestHelperProcess.start(arguments)
        var run = Run(output: [], wasKilled: false, killedWhileSyncing: false)
        var syncs = 0
        while let line = await lines.nextLine() {
            run.output.append(line)
            if line == "sync" { syncs += 1 }
            let due: Bool
            switch kill {
            case .duringSync(let n, let delay):
                due = line == "sync" && syncs == n
                if due {
                    run.killedWhileSyncing = true
                    try await Task.sleep(for: delay)  // a random moment inside the sync, not a wait for it
                }
            case .afterLine(let n): due = run.output.count == n
            case .never: due = false
            }
            if due && line != "done" {
                child.signal(SIGKILL)
                run.wasKilled = true
                break
            }
        }
        await child.waitForExit()
        while let line = await lines.nextLine() { run.output.append(line) }
        return run
    }
}
