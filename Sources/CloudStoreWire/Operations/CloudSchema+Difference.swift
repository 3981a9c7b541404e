import Foundation

extension CloudSchema {
    /// How an app's record types meet the schema a server has: what the app would send that the
    /// server lacks or types otherwise, and what the server has that the app does not know.
    /// Decided without I/O; ``CloudSchema/difference(from:)`` makes one.
    ///
    /// ```swift
    /// let difference = appSchema.cloudSchema.difference(from: try await database.fetchSchema())
    /// for problem in difference.refusals(in: .production) { print(problem) }
    /// ```
    public struct Difference: Hashable, Sendable {
        /// A field both have, with another type on the server.
        public struct Mismatch: Hashable, Sendable, CustomStringConvertible {
            public var recordType: String
            public var field: String
            public var app: FieldType
            public var server: FieldType

            public init(recordType: String, field: String, app: FieldType, server: FieldType) {
                self.recordType = recordType
                self.field = field
                self.app = app
                self.server = server
            }

            public var description: String {
                "field \(recordType).\(field) is \(app.rawValue) in the app and \(server.rawValue) on the server"
            }
        }

        /// Record types the app has and the server does not.
        public var missingRecordTypes: [String] = []
        /// Fields (`Type.field`) of record types both have that only the app has.
        public var missingFields: [String] = []
        /// Fields both have, with types that do not accept each other's values.
        public var mismatches: [Mismatch] = []
        /// Fields (`Type.field`) only the server has: another app version's. This app keeps their
        /// values as the server sends them and sends them back unchanged.
        public var serverOnlyFields: [String] = []
        /// Uniqueness constraints (`Type[field, …]`) the app declares and the server does not
        /// have: until it does, it does not refuse a second record with the key, and devices that
        /// create one offline keep both. A container declares them in development before its first
        /// upload; a production server takes them from its operator (`cloudstore schema init`).
        public var missingUniquenessConstraints: [String] = []

        /// No difference.
        public init() {}

        /// Whether the two agree on every record type and field the app has.
        public var isCompatible: Bool { missingRecordTypes.isEmpty && missingFields.isEmpty && mismatches.isEmpty }

        /// What a server of `environment` refuses of the app's saves, one sentence each, naming
        /// the record type or field and what to do. In `development` the server adds missing record
        /// types and fields as the first saves carry them, so only mismatches remain; in
        /// `production` the schema must hold everything first.
        public func refusals(in environment: CloudEnvironment) -> [String] {
            var problems = mismatches.map { "\($0): saves of it are refused; give the field a new name in the app" }
            guard environment == .production else { return problems }
            problems += missingRecordTypes.map {
                "record type \($0) is not in the production schema: saves of it are refused until it is added (cloudstore schema init with the operator's token)"
            }
            problems += missingFields.map {
                "field \($0) is not in the production schema: saves carrying it are refused until it is added (cloudstore schema init with the operator's token)"
            }
            return problems
        }
    }

    /// Constraints as a difference lists them: `Type[field, …]`.
    private static func named(_ constraints: [[String]], of type: RecordType) -> [String] {
        constraints.map { "\(type.name)[\($0.joined(separator: ", "))]" }
    }

    /// How this schema (an app's record types) meets `server`, the schema a server has.
    public func difference(from server: CloudSchema) -> Difference {
        var difference = Difference()
        for type in recordTypes.sorted(by: { $0.name < $1.name }) {
            guard let serverType = server.recordType(named: type.name) else {
                difference.missingRecordTypes.append(type.name)
                difference.missingUniquenessConstraints += Self.named(type.uniquenessConstraints(missingFrom: nil), of: type)
                continue
            }
            for field in type.fields.sorted(by: { $0.name < $1.name }) {
                guard let serverField = serverType.field(named: field.name) else {
                    difference.missingFields.append("\(type.name).\(field.name)")
                    continue
                }
                if !serverField.type.accepts(field.type) {
                    difference.mismatches.append(
                        Difference.Mismatch(recordType: type.name, field: field.name, app: field.type, server: serverField.type))
                }
            }
            for field in serverType.fields.sorted(by: { $0.name < $1.name }) where type.field(named: field.name) == nil {
                difference.serverOnlyFields.append("\(type.name).\(field.name)")
            }
            difference.missingUniquenessConstraints += Self.named(type.uniquenessConstraints(missingFrom: serverType), of: type)
        }
        return difference
    }
}
