import GRDB

/// A store operation that failed, with a message that names the file, entity, property or
/// migration step involved and what to do about it.
///
/// Match a kind of failure by its ``code``:
///
/// ```swift
/// do {
///     let transactions = try store.history(after: savedToken)
/// } catch StoreError.Code.historyTokenExpired {
///     // The history the token pointed into was purged: re-read everything.
/// }
/// ```
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as in `historyTokenExpired`.
        public var rawValue: String
        /// The code named `rawValue`; use the constants below.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// The file is not a CloudStore store: not SQLite at all, or SQLite without CloudStore's metadata.
        public static let notAStore = Code(rawValue: "notAStore")
        /// SQLite reports the file as damaged.
        public static let corrupt = Code(rawValue: "corrupt")
        /// The store was written by a newer schema version than the one it is opened with.
        public static let schemaTooOld = Code(rawValue: "schemaTooOld")
        /// The schema's shape changed but its version did not.
        public static let schemaVersionNotBumped = Code(rawValue: "schemaVersionNotBumped")
        /// The store holds another schema (a different schema name).
        public static let schemaMismatch = Code(rawValue: "schemaMismatch")
        /// A schema change loses data and no explicit migration step handles it.
        public static let destructiveMigration = Code(rawValue: "destructiveMigration")
        /// A migration step failed; the store is unchanged.
        public static let migrationFailed = Code(rawValue: "migrationFailed")
        /// The schema is not valid (see ``SchemaError``) or uses something the store cannot hold.
        public static let invalidSchema = Code(rawValue: "invalidSchema")
        /// An insert used an id that already exists.
        public static let objectExists = Code(rawValue: "objectExists")
        /// An update or delete named an id that does not exist.
        public static let objectNotFound = Code(rawValue: "objectNotFound")
        /// An entity name the schema does not declare.
        public static let unknownEntity = Code(rawValue: "unknownEntity")
        /// A property name the entity does not declare.
        public static let unknownProperty = Code(rawValue: "unknownProperty")
        /// A value of the wrong type, or a missing required value.
        public static let invalidValue = Code(rawValue: "invalidValue")
        /// A delete refused by a `deny` delete rule.
        public static let deleteDenied = Code(rawValue: "deleteDenied")
        /// The history after a token was purged (like `NSPersistentHistoryTokenExpiredError`), or the
        /// token belongs to another store. Re-read the whole store instead of resuming from the token.
        public static let historyTokenExpired = Code(rawValue: "historyTokenExpired")
        /// A history token that cannot be read.
        public static let invalidHistoryToken = Code(rawValue: "invalidHistoryToken")
        /// A write to a store file that requires a unit-of-work observer this version does not
        /// know (a newer CloudStore's): write with that version, so nothing it records is skipped.
        /// (A plain `PersistentStore` on a mirrored file records its saves for upload itself.)
        public static let mirroredStore = Code(rawValue: "mirroredStore")
        /// A write to a store opened for inspection (``PersistentStore/init(inspecting:schema:logger:)``),
        /// which never writes: open it with ``PersistentStore/init(url:schema:migrations:configuration:logger:)``
        /// (or its container, when it is mirrored) to change it.
        public static let readOnly = Code(rawValue: "readOnly")
        /// The store cannot be read as it is: it must be upgraded first (migrated to the schema it
        /// is opened with, or its mirroring metadata moved to the current layout); the message
        /// says how.
        public static let needsUpgrade = Code(rawValue: "needsUpgrade")
        /// The store or query generation was closed.
        public static let closed = Code(rawValue: "closed")
        /// The file of an external-storage value could not be written, or is missing or damaged
        /// when read; the message names the file and the value.
        public static let externalData = Code(rawValue: "externalData")
        /// A typed query (``FetchDescriptor``) uses an expression the store cannot turn into SQL;
        /// the message names it and what to write instead.
        public static let unsupportedQuery = Code(rawValue: "unsupportedQuery")
        /// SQLite failed for another reason; the message carries SQLite's.
        public static let sqlite = Code(rawValue: "sqlite")
        /// A write gave an object the values of a uniqueness constraint another object of its
        /// entity has (``EntityDescription/uniquenessConstraints``); the message names the entity
        /// and the properties. Nothing of the unit of work was written.
        public static let uniqueKeyTaken = Code(rawValue: "uniqueKeyTaken")
    }

    /// The kind of failure, to match on.
    public var code: Code
    /// What went wrong and what to do, naming the file, entity, property or step.
    public var message: String

    /// An error of `code` with `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension StoreError.Code {
    /// Lets `catch StoreError.Code.historyTokenExpired { … }` match a store error by its code.
    public static func ~= (code: StoreError.Code, error: any Error) -> Bool {
        (error as? StoreError)?.code == code
    }
}

extension StoreError {
    /// Wraps any error thrown while working on the file at `path`: store errors pass through,
    /// SQLite's corruption codes become ``Code/corrupt``, other SQLite errors ``Code/sqlite``.
    static func wrapping(_ error: any Error, path: String, while doing: String) -> any Error {
        guard let error = error as? DatabaseError else { return error }
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return StoreError(
                .corrupt,
                "\(path) is damaged (\(error.message ?? "SQLite \(error.resultCode)")) while \(doing); restore it from a backup, or delete it to start over (a mirrored store re-downloads its data)")
        case .SQLITE_CONSTRAINT where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE:
            return uniqueKeyTaken(error.message ?? "", path: path) ?? sqlite(error, path: path, while: doing)
        default:
            return sqlite(error, path: path, while: doing)
        }
    }

    private static func sqlite(_ error: DatabaseError, path: String, while doing: String) -> StoreError {
        StoreError(.sqlite, "\(path): SQLite failed while \(doing): \(error.message ?? "\(error.resultCode)")")
    }

    /// ``Code/uniqueKeyTaken`` for SQLite's "UNIQUE constraint failed: Folder.title, Folder.kind"
    /// on an entity's table; nil for CloudStore's own tables (whose constraints are its own).
    static func uniqueKeyTaken(_ message: String, path: String) -> StoreError? {
        let prefix = "UNIQUE constraint failed: "
        guard message.hasPrefix(prefix) else { return nil }
        let columns = message.dropFirst(prefix.count).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let parts = columns.map { $0.split(separator: ".", maxSplits: 1).map(String.init) }
        guard let entity = parts.first?.first, parts.allSatisfy({ $0.count == 2 && $0[0] == entity }),
            !entity.lowercased().hasPrefix("cloudstore"), !entity.lowercased().hasPrefix("sqlite_")
        else { return nil }
        let properties = parts.map { $0[1] }
        let values = properties.count == 1 ? "\(properties[0])" : "[\(properties.joined(separator: ", "))]"
        return StoreError(
            .uniqueKeyTaken,
            "\(path): another \(entity) has the same \(values) (a uniqueness constraint of \(entity)); nothing was written: give this object another value, or change or delete the one that has it")
    }
}
