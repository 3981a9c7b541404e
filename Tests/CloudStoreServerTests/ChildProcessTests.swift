import CloudStoreTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The children tests start (servers, crash helpers, the CLI, the browser) come from
/// `ChildProcess`: started with many descriptors open in the parent, which crashed Foundation's
/// `Process.run()` on Linux, they see none of them, and how they ended is reported exactly.
@Suite("Child processes")
struct ChildProcessTests {
    /// What `/bin/sh -c script` printed, and how it ended.
    static func run(_ script: String) async throws -> (output: String, termination: ChildProcess.Termination) {
        let output = Pipe()
        let child = try ChildProcess.spawn(URL(fileURLWithPath: "/bin/sh"), ["-c", script], standardOutput: .pipe(output))
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        return (String(decoding: printed, as: UTF8.self), await child.waitForExit())
    }

    /// 1,500 descriptors open here (past the ~1,360 at which Foundation's `Process.run()` read
    /// beyond glibc's `/proc/self/fd` buffer): the child starts and holds only 0, 1 and 2.
    @Test func manyDescriptorsOpenHere_theChildStartsWithOnlyItsStandardOnes() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 2048 {
            limit.rlim_cur = min(2048, limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= 1600, "this test needs 1,600 descriptors; the hard limit is \(limit.rlim_max)")
        // Inheritable (no O_CLOEXEC), as the descriptors of Foundation's `Pipe` are.
        let held = (0..<1500).map { _ in open("/dev/null", O_RDONLY) }
        defer { held.forEach { close($0) } }
        #expect(held.allSatisfy { $0 >= 0 })

        // The shell lists its own descriptors (not those of a command it would start).
        let (output, termination) = try await Self.run("ls /proc/$$/fd")
        #expect(termination == .exited(0))
        let descriptors = Set(output.split(whereSeparator: \.isWhitespace).map(String.init))
        #expect(descriptors.isSuperset(of: ["0", "1", "2"]), "\(descriptors)")
        #expect(descriptors.subtracting(["0", "1", "2"]).count <= 1, "inherited: \(descriptors.sorted())")
    }

    @Test func termination_isTheExitStatusOrTheSignal() async throws {
        #expect(try await Self.run("echo out; exit 3") == ("out\n", .exited(3)))

        let sleeper = try ChildProcess.spawn(URL(fileURLWithPath: "/bin/sleep"), ["30"])
        #expect(sleeper.termination == nil)
        sleeper.signal(SIGTERM)
        #expect(await sleeper.waitForExit() == .signaled(SIGTERM))
        #expect(sleeper.waitUntilExit() == .signaled(SIGTERM), "answered again once reaped")
        #expect(sleeper.termination == .signaled(SIGTERM))
    }

    @Test func missingExecutable_isAnErrorNamingIt() throws {
        let error = #expect(throws: ChildProcess.SpawnError.self) {
            try ChildProcess.spawn(URL(fileURLWithPath: "/nonexistent/cloudstore"), [])
        }
        #expect(error?.description.contains("/nonexistent/cloudstore") == true, "\(String(describing: error))")
    }
}
