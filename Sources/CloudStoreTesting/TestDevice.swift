import CloudStore
import Foundation
import Logging

/// One device of a user: a `PersistentCloudContainer` on its own store file in a temporary
/// directory, that syncs only when told (``sync()``) unless `automatic` is set.
///
/// ```swift
/// try await TestServer.with { server in
///     let a = try await TestDevice.make("A", schema: schema, server: server.baseURL)
///     let b = try await TestDevice.make("B", schema: schema, server: server.baseURL)
///     try await a.write { context in try context.insert(Note(title: "Groceries")) }
///     try await a.sync()
///     try await b.sync()   // B has the note
///     await a.close()
///     await b.close()
/// }
/// ```
public final class TestDevice: Sendable {
    /// The container identifier devices sync with unless told otherwise.
    ///
    /// ```swift
    /// let database = HTTPCloudDatabase(
    ///     baseURL: server.baseURL, container: TestDevice.containerIdentifier, token: "alice-token", deviceID: "admin")
    /// ```
    public static let containerIdentifier = "iCloud.com.example.notes"

    /// The device's name, also its device ID on the server and the context name of ``write(_:)``.
    ///
    /// ```swift
    /// #expect(device.name == "A")
    /// ```
    public let name: String

    /// The device's container.
    ///
    /// ```swift
    /// try await device.container.waitUntilSynced(timeout: .seconds(30))
    /// ```
    public let container: PersistentCloudContainer

    /// The directory of the device's store file, `<name>.sqlite`; pass it to another
    /// ``make(_:schema:server:containerIdentifier:token:policy:automatic:pageSize:directory:logger:configure:)``
    /// to open the same store again (a restarted device).
    ///
    /// ```swift
    /// await device.close()
    /// let restarted = try await TestDevice.make("A", schema: schema, server: url, directory: device.directory)
    /// ```
    public let directory: TemporaryDirectory

    /// Opens a device's container on `<directory>/<name>.sqlite`.
    ///
    /// ```swift
    /// let b = try await TestDevice.make("B", schema: schema, server: server.baseURL, token: "bob-token", policy: .localWins) {
    ///     $0.zoneName = "Shared"
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: the device's name and device ID.
    ///   - schema: the schema of the device's store.
    ///   - server: the server to mirror with; nil for a local-only container.
    ///   - containerIdentifier: the container on the server; ``containerIdentifier`` by default.
    ///   - token: the user's bearer token; `alice-token` (user `_alice` of ``TestServer``) by default.
    ///   - policy: how fields both this device and another changed are resolved.
    ///   - automatic: sync by itself, as an app does; off by default, so the test calls ``sync()``.
    ///   - pageSize: the fetch page size (`PersistentCloudContainer.Options.fetchPageSize`).
    ///   - directory: where the store file is; a new temporary directory by default.
    ///   - logger: the container's logger; by default it logs nothing.
    ///   - configure: changes the options after the others are set.
    public static func make(
        _ name: String, schema: Schema, server: URL?, containerIdentifier: String = containerIdentifier,
        token: String = "alice-token", policy: ConflictPolicy = .serverWins, automatic: Bool = false,
        pageSize: Int? = nil, directory: TemporaryDirectory? = nil,
        logger: Logger = Logger(label: "cloudstore.test-device", factory: { _ in SwiftLogNoOpLogHandler() }),
        configure: (inout PersistentCloudContainer.Options) -> Void = { _ in }
    ) async throws -> TestDevice {
        let directory = try directory ?? TemporaryDirectory()
        var options = PersistentCloudContainer.Options(
            server: server.map {
                .init(url: $0, containerIdentifier: containerIdentifier, token: token, deviceID: name)
            },
            conflictPolicy: policy)
        options.automaticallySync = automatic
        options.fetchPageSize = pageSize
        configure(&options)
        let container = try await PersistentCloudContainer(
            url: directory.file("\(name).sqlite"), schema: schema, options: options, logger: logger)
        return TestDevice(name: name, container: container, directory: directory)
    }

    private init(name: String, container: PersistentCloudContainer, directory: TemporaryDirectory) {
        self.name = name
        self.container = container
        self.directory = directory
    }

    /// The container's store.
    ///
    /// ```swift
    /// let count = try device.store.read { try $0.fetch(Note.self).count }
    /// ```
    public var store: PersistentStore { container.store }

    /// Writes to the store as the app would: author `app`, context name ``name``.
    ///
    /// ```swift
    /// try await device.write { context in try context.insert(Note(title: "Groceries")) }
    /// ```
    public func write(_ block: @escaping @Sendable (WriteContext) throws -> Void) async throws {
        try await store.write(author: "app", contextName: name, block)
    }

    /// Sends the device's changes and fetches everyone else's.
    ///
    /// ```swift
    /// try await device.sync()
    /// ```
    public func sync() async throws { try await container.sync() }

    /// Closes the container, ignoring a failure to close.
    ///
    /// ```swift
    /// await device.close()
    /// ```
    public func close() async {
        try? await container.close()
    }
}
