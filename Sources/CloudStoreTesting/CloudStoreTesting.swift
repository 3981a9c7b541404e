@_exported import CloudStore
