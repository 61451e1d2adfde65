// MySqlLockStore on a MariaDB server of the file's own keeps to the whole
// store contract (../contract.mjs), across processes too, with fencing
// tokens and keys of any size and content (each is found by its hash).
import { mysqlContract } from '../../helpers/mysql-contract.mjs'
import { mariadbForTests } from '../../../support/mariadb.mjs'

mysqlContract('MySqlLockStore', mariadbForTests, (server) => server.url)
