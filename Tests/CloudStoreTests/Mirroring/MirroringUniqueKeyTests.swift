@testable import CloudStore
import CloudStoreSync
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// Unique keys under sync, through a real `cloudstore serve` child: two devices create a folder
/// and a tag with the same unique key offline; whichever order they sync in, both end with one
/// folder and one tag holding everything both created (MirrorWrite+UniqueKeys.swift).
@Suite("Mirroring: unique keys survive sync", .serialized)
struct MirroringUniqueKeyTests {
    /// The Notes schema with a folder's title and a tag's name unique.
    static func schema() throws -> Schema {
        var schema = try Schema.notes()
        for index in schema.entities.indices {
            switch schema.entities[index].name {
            case "Folder": schema.entities[index].uniquenessConstraints = [["title"]]
            case "Tag": schema.entities[index].uniquenessConstraints = [["name"]]
            default: break
            }
        }
        return schema
    }

    @Test func theNewcomerMergesIntoTheExistingObjectFieldByField() {
        let resolution = ConflictResolution(policy: .serverWins, now: Date(timeIntervalSince1970: 100))
        let (existing, newcomer) = (UUID(), UUID())
        let outcome = resolution.newcomerAgainstExisting(
            ConflictResolution.Fields(
                local: ["title": .string("Groceries"), "sortIndex": .int64(5), "color": .string("blue")],
                localChanges: ["title": .distantPast, "sortIndex": .distantPast, "color": .distantPast],
                ancestor: nil, server: ["title": .string("Groceries"), "sortIndex": .int64(0), "color": .null]),
            into: ConflictResolution.Object(entityName: "Folder", id: existing), newcomer: newcomer)
        #expect(outcome.merged == ["title": .string("Groceries"), "sortIndex": .int64(0), "color": .string("blue")])
        #expect(outcome.keysToUpload == ["color"], "a value only the newcomer has is kept, without a conflict")
        #expect(outcome.conflicts.map(\.property) == ["sortIndex", "*"])
        #expect(outcome.conflicts[0].losingValue == .int64(5) && outcome.conflicts[0].losingSide == .local)
        #expect(outcome.conflicts[1].objectID == newcomer && outcome.conflicts[1].winningValue == .uuid(existing))
        #expect(outcome.conflicts[1].policy == ConflictResolution.uniqueKeyMergePolicy)

        let nullNewcomer = resolution.newcomerAgainstExisting(
            ConflictResolution.Fields(
                local: ["title": .string("Groceries"), "color": .null], localChanges: ["title": .distantPast, "color": .distantPast],
                ancestor: nil, server: ["title": .string("Groceries"), "color": .string("red")]),
            into: ConflictResolution.Object(entityName: "Folder", id: existing), newcomer: newcomer)
        #expect(nullNewcomer.merged["color"] == .string("red"), "the newcomer's null never clears a value")
        #expect(nullNewcomer.conflicts.count == 1)
    }

    @Test func theDeclarationKeepsWhatTheServerHas() throws {
        let ours = try Self.schema().cloudSchema
        let folder = try #require(ours.recordType(named: "Folder"))
        #expect(folder.uniquenessConstraints == [["title"]])
        let server = CloudSchema(recordTypes: [
            CloudSchema.RecordType(
                name: "Folder", fields: [CloudSchema.Field(name: "archived", type: .int64)], uniquenessConstraints: [["code"]])
        ])
        let request = try #require(server.uniquenessDeclaration(for: ours))
        let declared = try #require(request.recordType(named: "Folder"))
        #expect(declared.field(named: "archived") != nil && declared.field(named: "title") != nil)
        #expect(declared.uniquenessConstraints == [["code"], ["title"]])
        #expect(request.recordType(named: "Tag")?.uniquenessConstraints == [["name"]])
        #expect(request.recordType(named: "Note") == nil)
        var after = server
        for type in request.recordTypes {
            after.recordTypes.removeAll { $0.name == type.name }
            after.recordTypes.append(type)
        }
        #expect(after.uniquenessDeclaration(for: ours) == nil, "once declared, nothing more to declare")
    }

    /// A and B each create a folder "Groceries" with a note in it, tagged "urgent", offline. A
    /// syncs first; then B, whose sync is `bSyncs`. Both must end with A's folder and tag, holding
    /// both notes, and B's values where A had none.
    func bothCreateTheSameKeysOffline(_ bSyncs: (TestDevice) async throws -> Void) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            try await bothCreateTheSameKeysOffline(a: server.baseURL, b: server.baseURL, bSyncs)
        }
    }

    func bothCreateTheSameKeysOffline(a aServer: URL, b bServer: URL, _ bSyncs: (TestDevice) async throws -> Void) async throws {
        do {
            let schema = try Self.schema()
            let a = try await TestDevice.make("A", schema: schema, server: aServer, policy: .serverWins)
            let b = try await TestDevice.make("B", schema: schema, server: bServer, policy: .serverWins)
            try await a.sync()
            try await b.sync()
            let (folderA, tagA, noteA) = (Folder(title: "Groceries", color: "red"), Tag(name: "urgent"), UUID())
            let (folderB, tagB, noteB) = (Folder(title: "Groceries", sortIndex: 5), Tag(name: "urgent", color: "blue"), UUID())
            try await a.write { context in
                try context.insert(folderA)
                try context.insert(tagA)
                try context.insert(Note(id: noteA, title: "milk", folder: folderA.id, tags: [tagA.id]))
            }
            try await b.write { context in
                try context.insert(folderB)
                try context.insert(tagB)
                try context.insert(Note(id: noteB, title: "eggs", folder: folderB.id, tags: [tagB.id]))
            }
            try await a.sync()
            try await bSyncs(b)
            try await b.container.waitUntilSynced(timeout: .seconds(20))
            try await a.container.waitUntilSynced(timeout: .seconds(20))

            for device in [a, b] {
                let folders = try device.folders()
                #expect(folders.map(\.id) == [folderA.id], "\(device.name): one folder, A's")
                #expect(folders.first?.color == "red" && folders.first?.sortIndex == 0, "\(device.name): \(folders)")
                #expect(Set(folders.first?.notes ?? []) == [noteA, noteB], "\(device.name): both notes in it")
                let tags = try device.tags()
                #expect(tags.map(\.id) == [tagA.id], "\(device.name): one tag, A's")
                #expect(tags.first?.color == "blue", "\(device.name): B's value where A had none")
                #expect(Set(tags.first?.notes ?? []) == [noteA, noteB], "\(device.name): both notes tagged")
                #expect(try device.notes().count == 2)
            }
            #expect(try a.contents() == b.contents())
            let merges = try b.container.conflicts().filter { $0.policy == ConflictResolution.uniqueKeyMergePolicy }
            #expect(Set(merges.map(\.objectID)) == [folderB.id, tagB.id], "B's conflict log says what merged into what")
            let lost = try b.container.conflicts().filter { $0.property == "sortIndex" }
            #expect(lost.map(\.losingValue) == [.int64(5)], "the value that lost is logged")
            await a.close()
            await b.close()
        }
    }

    /// Bob shares his folder "Groceries" with alice, who has her own: her store's constraint
    /// spans zones, the server's does not, so bob's folder waits aside on her device, nothing lost.
    /// Once she renames hers, her next sync applies bob's folder.
    @Test func aRecordKeptAsideIsAppliedOnceItsKeyIsFree() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let schema = try Self.schema()
            let alice = try await TestDevice.make("alice", schema: schema, server: server.baseURL, token: "alice-token")
            let bob = try await TestDevice.make("bob", schema: schema, server: server.baseURL, token: "bob-token")
            var hers = Folder(title: "Groceries")
            let his = Folder(title: "Groceries", color: "green")
            try await alice.write { [hers] in try $0.insert(hers) }
            try await bob.write { try $0.insert(his) }
            try await alice.sync()
            try await bob.sync()
            let share = try await bob.container.share(his, with: [.init(user: "_alice", permission: .readWrite)], title: "Groceries")
            _ = try await alice.container.acceptShare(shortGUID: try #require(share.shortGUID))
            try await alice.sync()
            #expect(try alice.folders().map(\.id) == [hers.id], "bob's folder waits aside: alice's has its title here")
            let kept = try await alice.store.read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM cloudstore_mirror_kept_aside") }
            #expect(kept == 1)

            hers.title = "Groceries at home"
            try await alice.write { [hers] in try $0.update(hers) }
            try await alice.sync()
            let folders = try alice.folders()
            #expect(Set(folders.map(\.id)) == [hers.id, his.id], "bob's folder applied once the key is free")
            #expect(folders.first { $0.id == his.id }?.color == "green")
            let left = try await alice.store.read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM cloudstore_mirror_kept_aside") }
            #expect(left == 0)
            await alice.close()
            await bob.close()
        }
    }

    /// Devices A and B of one user whose folders refuse duplicate titles (``DuplicateKeyRule/refuse``).
    /// B logs to `bLog` when given.
    static func devicesRefusingDuplicateFolders(_ server: URL, bLog: LogRecorder? = nil) async throws -> (TestDevice, TestDevice) {
        var schema = try Self.schema()
        let folder = try #require(schema.entities.firstIndex { $0.name == "Folder" })
        schema.entities[folder].duplicateKeyRule = .refuse
        let a = try await TestDevice.make("A", schema: schema, server: server)
        guard let bLog else { return (a, try await TestDevice.make("B", schema: schema, server: server)) }
        return (a, try await TestDevice.make("B", schema: schema, server: server, logger: bLog.logger()))
    }

    /// Folders refuse duplicates (``DuplicateKeyRule/refuse``): A and B create "Groceries"
    /// offline, A syncs first. B's fetch keeps A's folder aside (when B fetches first; else the
    /// server's refusal brings it), the server refuses B's, which stays on B, listed as refused
    /// with the error naming A's record; nothing merges. Once B renames its folder, it uploads,
    /// A's arrives, and both devices have both.
    @Test(arguments: [true, false])
    func anEntityThatRefusesDuplicatesKeepsTheNewcomerForTheApp(fetchFirst: Bool) async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let log = LogRecorder()
            let (a, b) = try await Self.devicesRefusingDuplicateFolders(server.baseURL, bLog: log)
            let folderA = Folder(title: "Groceries", color: "red")
            var folderB = Folder(title: "Groceries", sortIndex: 5)
            try await a.write { try $0.insert(folderA) }
            try await b.write { [folderB] in try $0.insert(folderB) }
            try await a.sync()
            if fetchFirst {
                try await b.container.fetchChanges()
                #expect(try b.folders().map(\.id) == [folderB.id], "A's folder waits aside: B's has its title here")
            }

            let refused = await #expect(throws: ContainerError.self) {
                try await b.container.waitUntilSynced(timeout: .seconds(20))
            }
            #expect(refused?.code == .uploadsRefused)
            let state = try #require(try b.container.syncState(of: Folder.self, id: folderB.id))
            #expect(state.refusal?.code == .uniqueFieldError)
            #expect(state.refusal?.reason?.contains(folderA.id.uuidString) == true, "the error names the record that has the key")
            #expect(try b.container.refusedUploads().map(\.id) == [folderB.id])
            #expect(try b.folders().map(\.id) == [folderB.id] && b.folders().first?.sortIndex == 5, "B's folder is kept as it is")
            #expect(try b.container.conflicts().isEmpty, "nothing merged")
            let warnings = log.messages.filter { $0.hasPrefix("warning a fetched record is kept aside") }
            #expect(warnings.count == 1, "kept aside again by the refusal and later fetches: one warning, then debug lines: \(warnings)")

            folderB.title = "Groceries (B)"
            try await b.write { [folderB] in try $0.update(folderB) }
            try await b.container.waitUntilSynced(timeout: .seconds(20))
            try await a.container.waitUntilSynced(timeout: .seconds(20))
            for device in [a, b] {
                #expect(Set(try device.folders().map(\.title)) == ["Groceries", "Groceries (B)"], "\(device.name)")
            }
            #expect(try b.container.refusedUploads().isEmpty)
            #expect(try a.contents() == b.contents())
            await a.close()
            await b.close()
        }
    }

    /// The server has folders "Groceries" and "Groceries (B)" (A's). B, new, made "Groceries"
    /// offline and is refused; renaming it to "Groceries (B)", which B has fetched, fails at once
    /// with a clear error and writes nothing; renamed to a free title, it uploads, and A's first
    /// folder arrives.
    @Test func aRefusedNewcomerCannotTakeAnotherKeyTheDeviceHas() async throws {
        try await ServerProcess.with(users: TestServer.defaultUsers) { server in
            let (a, b) = try await Self.devicesRefusingDuplicateFolders(server.baseURL)
            let (first, second) = (Folder(title: "Groceries"), Folder(title: "Groceries (B)"))
            try await a.write { context in
                try context.insert(first)
                try context.insert(second)
            }
            try await a.sync()
            var newcomer = Folder(title: "Groceries")
            try await b.write { [newcomer] in try $0.insert(newcomer) }
            await #expect(throws: ContainerError.self) { try await b.container.waitUntilSynced(timeout: .seconds(20)) }

            var renamed = newcomer
            renamed.title = "Groceries (B)"
            let rename = renamed
            let taken = await #expect(throws: StoreError.self) { try await b.write { try $0.update(rename) } }
            #expect(taken?.code == .uniqueKeyTaken)
            #expect(taken?.message.contains("another Folder has the same title") == true, "\(String(describing: taken))")
            #expect(try b.folders().first { $0.id == newcomer.id }?.title == "Groceries", "nothing written")

            newcomer.title = "Groceries at B's"
            try await b.write { [newcomer] in try $0.update(newcomer) }
            try await b.container.waitUntilSynced(timeout: .seconds(20))
            #expect(Set(try b.folders().map(\.id)) == [first.id, second.id, newcomer.id], "A's first folder arrived once its title was free")
            #expect(try b.container.refusedUploads().isEmpty)
            await a.close()
            await b.close()
        }
    }

    @Test func theServerRefusesTheSecondKeyAndTheDeviceMerges() async throws {
        try await bothCreateTheSameKeysOffline { b in try await b.sync() }
    }

    /// The same on PostgreSQL with A and B on two server instances, B sending first.
    @Test(.enabled(if: ServerProcess.testPostgresURL != nil, "set CLOUDSTORE_TEST_POSTGRES_URL (bash .ci/run does) to run it"))
    func twoInstancesOnPostgreSQLMergeTheSameWay() async throws {
        try await ServerProcess.withTwoOnPostgres(users: TestServer.defaultUsers) { first, second in
            try await bothCreateTheSameKeysOffline(a: first, b: second) { b in try await b.sync() }
        }
    }

    @Test func aFetchedKeyMergesTheLocalNewcomer() async throws {
        try await bothCreateTheSameKeysOffline { b in
            try await b.container.fetchChanges()
            #expect(try b.folders().count == 1, "the fetch merged B's folder before B sent it")
            try await b.sync()
        }
    }
}
