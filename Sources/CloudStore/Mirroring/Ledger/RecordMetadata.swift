import CloudStoreSync
import Foundation
import GRDB
import GRDBSQLite

/// The two objects a many-to-many link record joins, by the canonical side of the relationship.
struct LinkEnds: Hashable, Sendable {
    /// `Entity.relationship` of the canonical side.
    var relationship: String
    var source: UUID
    var target: UUID
}

/// What this device knows of one record and still has to upload for it: one row of
/// `cloudstore_record_metadata`, written in the same transaction as the objects it describes.
///
/// The table is the one queue of pending uploads (``pendingUpload``): a save records its own in
/// its transaction, an import's merge records what this device's values won, and an upload stops
/// being pending only when the server acknowledged it.
struct RecordMetadata: Sendable {
    var recordName: String
    /// The entity, or ``LinkRecords/recordType`` for a link.
    var entityName: String
    /// The server's change tag of the last version this device has; nil when it has none.
    var changeTag: String?
    /// When the server wrote the version ``changeTag`` names (its `modified` stamp, milliseconds
    /// since 1970); nil when unknown.
    var serverModified: Int64?
    /// When the server created the copy of the record in its zone that ``changeTag`` is a version
    /// of (its `created` stamp, milliseconds since 1970); nil when unknown. Of two copies of an
    /// object in two zones the one created later is the object (``ObjectCopies``).
    var serverCreated: Int64?
    /// Whether this device created that copy and wrote the version ``changeTag`` names: nothing of
    /// another device's is in it (``ObjectCopies``).
    var writtenHere = false
    /// Whether the server may hold the record: this device has a server version of it, or handed
    /// an upload of it to the sync engine (its answer may have been lost, the device killed). A
    /// delete of such a record goes to the server; a record that never left the device is
    /// deleted here only.
    var mayBeOnServer = false
    /// The server copy of the values this device last agreed with (attributes and to-one ids): the
    /// ancestor of three-way merges. Decoded when read (``setAncestor(_:)`` sets it).
    var ancestor: [String: AttributeValue]? {
        get throws { try storedAncestor?.value }
    }
    /// Fields a newer version of the app wrote, uploaded again unchanged. Decoded when read
    /// (``setUnknownFields(_:)`` sets them).
    var unknownFields: [String: FieldValue] {
        get throws { try storedUnknownFields?.value ?? [:] }
    }
    fileprivate var storedAncestor: MetadataJSON<[String: AttributeValue]>?
    /// Nil when there are none.
    fileprivate var storedUnknownFields: MetadataJSON<[String: FieldValue]>?
    /// What this device still has to upload; nil when nothing. Decoded when read
    /// (``setPendingUpload(_:revision:)`` sets it).
    var pendingUpload: PendingUpload? {
        get throws { try storedPendingUpload?.value }
    }
    /// Whether something is pending, without decoding what.
    var hasPendingUpload: Bool { storedPendingUpload != nil }
    fileprivate var storedPendingUpload: MetadataJSON<PendingUpload>?
    /// The upload revision (a store-wide counter, one per transaction) that last changed
    /// ``pendingUpload``: uploads go in this order, and an acknowledgement clears the pending
    /// upload only if it is still the revision that was sent.
    private(set) var uploadRevision: Int64?
    /// Why the server refused the pending upload for good (too large, say); it is not sent again
    /// until the app changes the object.
    var refusal: ServerError?
    /// How the pending upload failed so far with errors that may pass (the server did not take it
    /// at its last attempt); it goes again by itself. Set by ``Database/setUploadRetry(_:of:in:)``
    /// as the engine reports the attempt, cleared when the server answers otherwise or nothing is
    /// left to upload.
    var retry: PersistentCloudContainer.ObjectSyncState.UploadRetry?
    var link: LinkEnds?
    /// The zone the record is in (or goes to): the primary zone unless the object is shared.
    var zone: MirrorZone.Key = .primary

    init(recordName: String, entityName: String, link: LinkEnds? = nil, zone: MirrorZone.Key = .primary) {
        self.recordName = recordName
        self.entityName = entityName
        self.link = link
        self.zone = zone
    }

    /// Whether this device has a server version of the record.
    var isOnServer: Bool { changeTag != nil }

    /// The ancestor's JSON as stored, without decoding it.
    func encodedAncestor() throws -> Data? { try storedAncestor?.encoded() }

    /// Sets the ancestor from its JSON as stored.
    mutating func setEncodedAncestor(_ data: Data?) {
        storedAncestor = data.map(MetadataJSON.init(encoded:))
    }

    mutating func setAncestor(_ values: [String: AttributeValue]?) {
        storedAncestor = values.map(MetadataJSON.init)
    }

    mutating func setUnknownFields(_ fields: [String: FieldValue]) {
        storedUnknownFields = fields.isEmpty ? nil : MetadataJSON(fields)
    }

    /// Sets one unknown field, keeping the others.
    mutating func setUnknownField(_ name: String, _ value: FieldValue) throws {
        var fields = try unknownFields
        fields[name] = value
        setUnknownFields(fields)
    }

    /// Sets what is pending, stamped with `revision` (taken only when something is pending);
    /// nothing pending has no retry either.
    mutating func setPendingUpload(_ upload: PendingUpload?, revision: () throws -> Int64) rethrows {
        storedPendingUpload = upload.map(MetadataJSON.init)
        uploadRevision = upload == nil ? nil : try revision()
        if upload == nil { retry = nil }
    }

    /// Adds one local change to what is pending (``PendingUpload/adding(_:at:to:mayBeOnServer:)``),
    /// stamped with `revision`; a new change lifts a refusal (the app changed the object). Answers
    /// whether the metadata stays: false for a record that never left the device and has nothing
    /// left to upload, whose metadata is to be deleted.
    mutating func add(_ change: PendingUpload.Change, at date: Date, revision: Int64) throws -> Bool {
        let upload = try PendingUpload.adding(change, at: date, to: pendingUpload, mayBeOnServer: mayBeOnServer)
        setPendingUpload(upload) { revision }
        refusal = nil
        return upload != nil || mayBeOnServer
    }

    /// The server has the record at `version` (its change tag, when it was written and its copy
    /// created, and whether by the device `deviceID`, this one).
    mutating func serverHas(_ version: Record, deviceID: String?) {
        changeTag = version.recordChangeTag
        serverModified = version.modified?.timestamp.millisecondsSince1970
        serverCreated = version.created?.timestamp.millisecondsSince1970
        writtenHere = deviceID != nil && version.created?.deviceID == deviceID && version.modified?.deviceID == deviceID
        mayBeOnServer = true
    }

    /// The copy of the object this device has, as ``ObjectCopies`` compares it with a copy fetched
    /// from another zone.
    var copy: ObjectCopies.Copy {
        ObjectCopies.Copy(created: serverCreated, modified: serverModified, changeTag: changeTag, writtenHere: writtenHere)
    }

    /// This device no longer knows which server version it has (it uploads the record as a new
    /// one); what the server may hold and the ancestor stay.
    mutating func forgetChangeTag() {
        changeTag = nil
        serverModified = nil
        serverCreated = nil
        writtenHere = false
    }

    /// The server lost the record (its zone was recreated, the account changed): upload it whole
    /// as a new record.
    mutating func forgetServerVersion() {
        forgetChangeTag()
        storedAncestor = nil
        mayBeOnServer = false
    }
}

extension Ledger {
    /// Stores a record's metadata.
    func save(_ metadata: RecordMetadata) throws {
        // Bound through the C API (``run(_:_:)``): GRDB's `StatementArguments` cost a quarter of
        // this write on the hot paths (a save's pending upload, an acknowledgement, an import).
        func blob(_ data: Data?) -> AttributeValue { data.map(AttributeValue.data) ?? .null }
        func integer(_ value: Int64?) -> AttributeValue { value.map(AttributeValue.int64) ?? .null }
        try db.run(
            """
            INSERT OR REPLACE INTO cloudstore_record_metadata
            (record_name, entity, change_tag, may_be_on_server, ancestor, unknown_fields, pending_upload,
             upload_revision, refusal, link_relationship, link_source, link_target, zone_name, zone_owner, server_modified, retry,
             server_created, written_here)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .string(metadata.recordName), .string(metadata.entityName), .string(orNull: metadata.changeTag),
                .bool(metadata.mayBeOnServer), blob(try metadata.storedAncestor?.encoded()),
                blob(try metadata.storedUnknownFields?.encoded()), blob(try metadata.storedPendingUpload?.encoded()),
                integer(metadata.uploadRevision), blob(try metadata.refusal.map { try MirrorTables.encode($0) }),
                .string(orNull: metadata.link?.relationship), metadata.link.map { .uuid($0.source) } ?? .null,
                metadata.link.map { .uuid($0.target) } ?? .null, .string(orNull: metadata.zone.name),
                .string(orNull: metadata.zone.owner), integer(metadata.serverModified),
                blob(try metadata.retry.map { try MirrorTables.encode($0) }), integer(metadata.serverCreated),
                .bool(metadata.writtenHere),
            ])
    }
}

extension RecordMetadata {
    /// `SELECT` of the columns ``init(statement:)`` reads, in its order, up to `WHERE `.
    static let select =
        "SELECT record_name, entity, change_tag, may_be_on_server, ancestor, unknown_fields, pending_upload, upload_revision, "
        + "refusal, link_relationship, link_source, link_target, zone_name, zone_owner, server_modified, retry, "
        + "server_created, written_here FROM cloudstore_record_metadata WHERE "
    /// ``select`` of one record, by name.
    static let selectByName = select + "record_name = ?"

    /// The current row of a statement of ``select``, read by position. The ancestor, unknown
    /// fields and pending upload stay JSON until read.
    init(statement: OpaquePointer) throws {
        func text(_ column: Int32) -> String? { columnTextOrNil(statement, column) }
        func data(_ column: Int32) -> Data? { columnDataOrNil(statement, column) }
        recordName = columnText(statement, 0)
        entityName = columnText(statement, 1)
        changeTag = text(2)
        mayBeOnServer = sqlite3_column_int64(statement, 3) != 0
        storedAncestor = data(4).map(MetadataJSON.init(encoded:))
        storedUnknownFields = data(5).map(MetadataJSON.init(encoded:))
        storedPendingUpload = data(6).map(MetadataJSON.init(encoded:))
        uploadRevision = columnInt64OrNil(statement, 7)
        refusal = try data(8).map { try MirrorTables.decode(ServerError.self, $0) }
        if let relationship = text(9), let source = columnUUID(statement, 10), let target = columnUUID(statement, 11) {
            link = LinkEnds(relationship: relationship, source: source, target: target)
        }
        zone = Self.zone(statement)
        serverModified = columnInt64OrNil(statement, 14)
        retry = try data(15).map { try MirrorTables.decode(PersistentCloudContainer.ObjectSyncState.UploadRetry.self, $0) }
        serverCreated = columnInt64OrNil(statement, 16)
        writtenHere = sqlite3_column_int64(statement, 17) != 0
    }

    /// The zone of the current row of a statement of ``select``.
    static func zone(_ statement: OpaquePointer) -> MirrorZone.Key {
        MirrorZone.Key(name: columnTextOrNil(statement, 12), owner: columnTextOrNil(statement, 13))
    }
}

/// A JSON column of a metadata row, kept as the bytes read until someone reads its value: a
/// caller that does not need it pays nothing, and a row written back stores the same bytes
/// without encoding them again.
struct MetadataJSON<Value: Codable & Sendable>: Sendable {
    private enum Storage: Sendable {
        case encoded(Data)
        case decoded(Value)
    }

    private var storage: Storage

    init(encoded data: Data) { storage = .encoded(data) }
    init(_ value: Value) { storage = .decoded(value) }

    var value: Value {
        get throws {
            switch storage {
            case .encoded(let data): try MirrorTables.decode(Value.self, data)
            case .decoded(let value): value
            }
        }
    }

    func encoded() throws -> Data {
        switch storage {
        case .encoded(let data): data
        case .decoded(let value): try MirrorTables.encode(value)
        }
    }
}
