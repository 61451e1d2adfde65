// The shape of the `connection()` the docs' database store uses.
export interface Connection {
  write(sql: string, params: unknown[]): Promise<{ changes: number }>
  select(sql: string, params: unknown[]): Promise<unknown[]>
}
export declare function connection(): Connection
