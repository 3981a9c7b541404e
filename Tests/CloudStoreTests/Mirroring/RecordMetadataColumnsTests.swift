import CloudStoreWire
import Foundation
import GRDB
import Testing

@testable import CloudStore

/// The JSON columns of a metadata row (ancestor, unknown fields) stay bytes until read: a row
/// read and written back keeps them byte for byte, one whose value was set stores the new value,
/// and a caller that does not read them does not pay for (or fail on) them.
@Suite struct RecordMetadataColumnsTests {
    static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try MirrorTables.migrator.migrate(queue)
        return queue
    }

    static func columns(_ db: Database, _ name: String) throws -> (ancestor: Data?, unknown: Data?) {
        let row = try Row.fetchOne(
            db, sql: "SELECT ancestor, unknown_fields FROM cloudstore_record_metadata WHERE record_name = ?", arguments: [name])
        return (row?["ancestor"], row?["unknown_fields"])
    }

    /// A version written at `milliseconds` by `device`, of a copy created at `created` by `device`.
    static func version(_ name: String, tag: String, at milliseconds: Int64, created: Int64 = 500, by device: String? = nil) -> CloudStoreWire.Record {
        CloudStoreWire.Record(
            recordName: name, recordType: "Note", recordChangeTag: tag,
            created: CloudStoreWire.Record.Stamp(timestamp: Date(millisecondsSince1970: created), deviceID: device),
            modified: CloudStoreWire.Record.Stamp(timestamp: Date(millisecondsSince1970: milliseconds), deviceID: device))
    }

    @Test func aRowWrittenBack_keepsItsColumnsByteForByte() throws {
        try Self.database().write { db in
            var metadata = RecordMetadata(recordName: "N-1", entityName: "Note")
            metadata.serverHas(Self.version("N-1", tag: "tag1", at: 1_000), deviceID: "phone")
            metadata.setAncestor(["title": .string("Hi"), "count": .int64(3), "when": .date(Date(millisecondsSince1970: 5))])
            metadata.setUnknownFields(["mood": .string("happy")])
            try Ledger(db).save(metadata)
            let written = try Self.columns(db, "N-1")

            var read = try #require(try Ledger(db).find("N-1"))
            #expect(read.serverModified == 1_000)
            #expect(read.serverCreated == 500 && !read.writtenHere)
            read.serverHas(Self.version("N-1", tag: "tag2", at: 2_000, by: "phone"), deviceID: "phone")
            try Ledger(db).save(read)
            let again = try Self.columns(db, "N-1")
            #expect(again.ancestor == written.ancestor)
            #expect(again.unknown == written.unknown)
            let back = try #require(try Ledger(db).find("N-1"))
            #expect(back.changeTag == "tag2")
            #expect(back.serverModified == 2_000, "the time the server wrote the version")
            #expect(back.serverCreated == 500, "the time the server created the copy")
            #expect(back.writtenHere, "this device created the copy and wrote the version")
            #expect(try back.ancestor == ["title": .string("Hi"), "count": .int64(3), "when": .date(Date(millisecondsSince1970: 5))])
            #expect(try back.unknownFields == ["mood": .string("happy")])
        }
    }

    @Test func setColumns_areStoredAndClearedColumnsAreNull() throws {
        try Self.database().write { db in
            var metadata = RecordMetadata(recordName: "N-1", entityName: "Note")
            metadata.setAncestor(["title": .string("Hi")])
            metadata.setUnknownFields(["mood": .string("happy")])
            try Ledger(db).save(metadata)
            var read = try #require(try Ledger(db).find("N-1"))
            read.setAncestor(["title": .string("Bye")])
            try read.setUnknownField(EditTimes.field, .string(#"{"title":1}"#))
            try Ledger(db).save(read)
            let back = try #require(try Ledger(db).find("N-1"))
            #expect(try back.ancestor == ["title": .string("Bye")])
            #expect(try back.unknownFields == ["mood": .string("happy"), EditTimes.field: .string(#"{"title":1}"#)])

            var cleared = back
            cleared.forgetServerVersion()
            cleared.setUnknownFields([:])
            try Ledger(db).save(cleared)
            let columns = try Self.columns(db, "N-1")
            #expect(columns.ancestor == nil)
            #expect(columns.unknown == nil)
        }
    }

    /// Metadata tables as a store from before `columns` were added has them (an earlier version,
    /// from before the tables had migrations), with one row, `N-0`.
    static func metadataWithout(_ columns: [String]) throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try MirrorTables.migrator.migrate(queue, upTo: "mirror-1")
        try queue.write { db in
            for column in columns { try db.execute(sql: "ALTER TABLE cloudstore_record_metadata DROP COLUMN \(column)") }
            try db.execute(sql: "DROP TABLE grdb_migrations")
            try db.execute(sql: "INSERT INTO cloudstore_record_metadata (record_name, entity) VALUES ('N-0', 'Note')")
        }
        return queue
    }

    /// A store from before copies' creation times were kept gains both columns when a container
    /// opens it: its rows know no creation time and no version written here, so ``ObjectCopies``
    /// takes the copy written later for them and deletes nothing.
    @Test func creationTimes_areAddedToExistingStoresUnknownForTheirRows() throws {
        let queue = try Self.metadataWithout(["server_created", "written_here"])
        try queue.write { db in
            try db.execute(sql: "UPDATE cloudstore_record_metadata SET change_tag = 't', server_modified = 7 WHERE record_name = 'N-0'")
        }
        try MirrorTables.migrator.migrate(queue)
        try queue.read { db in
            let row = try #require(try Ledger(db).find("N-0"))
            #expect(row.serverCreated == nil && !row.writtenHere)
            #expect(row.copy == ObjectCopies.Copy(created: nil, modified: 7, changeTag: "t"))
        }
    }

    /// A store from before retries were kept cannot be read for inspection (a clear error naming
    /// the column, not SQL's), and gains the column, empty for its rows, when a container opens
    /// it; a retry set on a row is read back, kept when the row is written back, and ends when
    /// nothing is left to upload.
    @Test func aRetry_isAddedToExistingStoresAndEndsWithThePendingUpload() throws {
        let queue = try Self.metadataWithout(["retry"])
        try queue.read { db in
            let unreadable = #expect(throws: StoreError.self) { try MirrorTables.checkReadable(db, path: "old.sqlite") }
            #expect(unreadable?.code == .needsUpgrade)
            #expect(unreadable?.description.contains("mirror-1") == true, "\(String(describing: unreadable))")
        }
        try MirrorTables.migrator.migrate(queue)
        try queue.write { db in
            let ledger = Ledger(db)
            try MirrorTables.checkReadable(db, path: "old.sqlite")
            #expect(try ledger.find("N-0")?.retry == nil)

            var metadata = RecordMetadata(recordName: "N-1", entityName: "Note")
            metadata.setPendingUpload(.delete) { 1 }
            try Ledger(db).save(metadata)
            let retry = PersistentCloudContainer.ObjectSyncState.UploadRetry(
                error: ServerError(.quotaExceeded, reason: "full"), attempts: 3, nextAttempt: Date(timeIntervalSince1970: 1_000))
            try ledger.setRetry(retry, of: "N-1", in: .primary)
            var read = try #require(try Ledger(db).find("N-1"))
            #expect(read.retry == retry)
            #expect(try ledger.retryingCount() == 1)
            try Ledger(db).save(read)
            #expect(try Ledger(db).find("N-1")?.retry == retry, "written back as read")
            read.setPendingUpload(nil) { 2 }
            try Ledger(db).save(read)
            #expect(try Ledger(db).find("N-1")?.retry == nil)
            #expect(try ledger.retryingCount() == 0)
        }
    }

    /// A damaged ancestor fails the caller that reads it, not every reader of the row.
    @Test func aDamagedColumn_failsOnlyWhenRead() throws {
        try Self.database().write { db in
            try Ledger(db).save(RecordMetadata(recordName: "N-1", entityName: "Note"))
            try db.execute(sql: "UPDATE cloudstore_record_metadata SET ancestor = X'7B2278' WHERE record_name = 'N-1'")
            let read = try #require(try Ledger(db).find("N-1"))
            #expect(read.entityName == "Note")
            #expect(throws: DecodingError.self) { try read.ancestor }
        }
    }
}
