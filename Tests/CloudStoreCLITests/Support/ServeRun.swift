import CloudStoreCLI
import CloudStoreSync
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore serve` running in process on a free loopback port, stopped by cancelling its task
/// (as SIGTERM stops the executable).
struct ServeRun {
    let captured: CapturedOutput
    let task: Task<Int32, Never>
    let port: Int

    /// Starts `cloudstore serve --host 127.0.0.1 --port 0 --container iCloud.cli.test <arguments>`
    /// (without `--container` when `declaringContainer` is false) and returns once it listens.
    static func start(
        _ arguments: [String], environment: [String: String] = [:], declaringContainer: Bool = true
    ) async throws -> ServeRun {
        let captured = CapturedOutput()
        let task = Task {
            let status = await CloudStoreCommand.run(
                ["serve", "--host", "127.0.0.1", "--port", "0"] + (declaringContainer ? ["--container", "iCloud.cli.test"] : [])
                    + arguments, output: captured.output,
                environment: environment)
            captured.output.print("test: serve exited with \(status)")
            return status
        }
        await captured.waitForOutput("listening on http://", "test: serve exited")
        let output = captured.standardOutput
        let port = try #require(
            output.firstMatch(of: #/listening on http://127\.0\.0\.1:(\d+) /#).flatMap { Int($0.1) },
            "serve did not start:\n\(output)\n\(captured.standardError)")
        return ServeRun(captured: captured, task: task, port: port)
    }

    /// The private database of the test container for `token`.
    func database(token: String?) -> HTTPCloudDatabase {
        HTTPCloudDatabase(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!, container: "iCloud.cli.test", token: token,
            deviceID: "cli-test")
    }

    /// Creates a zone and saves one record in it, as alice.
    func saveANote() async throws {
        let database = database(token: "alice-token")
        let zone = ZoneID(zoneName: "Notes")
        _ = try await database.modifyZones(ZonesModifyRequest(operations: [.init(.create, zone)]))
        let note = Record(recordType: "Note", recordID: RecordID(recordName: "N-1", zoneID: zone), fields: ["title": .string("Hi")])
        _ = try await database.modifyRecords(RecordsModifyRequest(zoneID: zone, operations: [.init(.create, note)]))
    }

    /// Stops the server and answers its exit status.
    func stop() async -> Int32 {
        task.cancel()
        return await task.value
    }
}

/// A tokens file for the default test users (`alice-token` → `_alice`, `bob-token` → `_bob`).
func writeTokensFile(in directory: URL) throws -> String {
    let file = directory.appendingPathComponent("tokens.json")
    try JSONEncoder().encode(TestServer.defaultUsers).write(to: file)
    return file.path
}
